"""DeepSpeed's FusedAdam on the CPU, so that a real engine picks FP16_Optimizer (the "fused" wrapper, whose
masters are one flat fp32 tensor per group: `fp32_groups_flat`) at ZeRO stage 0 without a GPU.

The engine chooses FP16_Optimizer only for an instance of deepspeed.ops.adam.FusedAdam, whose constructor
JIT-builds a CUDA kernel. CpuFusedAdam is that class with the build skipped and the kernel replaced by the same
Adam/AdamW arithmetic in torch: FusedAdam.step itself (DeepSpeed's code) keeps the state, so what the checkpoint
holds is what a GPU run saves. install() makes deepspeed.initialize hand the engine a CpuFusedAdam built from the
config's "optimizer" params (and drops that key: DeepSpeed refuses both)."""
import torch

import deepspeed
from deepspeed.ops.adam import FusedAdam


def _adam_kernel(chunk_size, noop_flag, tensor_lists, lr, beta1, beta2, eps, step, adam_w_mode, bias_correction,
                 weight_decay):
    """multi_tensor_adam's arithmetic (csrc/adam/multi_tensor_adam.cu), one tensor at a time in fp32."""
    del chunk_size, noop_flag
    bc1 = 1 - beta1**step if bias_correction else 1.0
    bc2 = 1 - beta2**step if bias_correction else 1.0
    for g, p, m, v in zip(*tensor_lists):
        g32, p32 = g.float(), p.float()
        m32, v32 = m.float(), v.float()
        if not adam_w_mode and weight_decay != 0:
            g32 = g32 + weight_decay * p32
        m32.mul_(beta1).add_(g32, alpha=1 - beta1)
        v32.mul_(beta2).addcmul_(g32, g32, value=1 - beta2)
        update = (m32 / bc1) / ((v32 / bc2).sqrt() + eps)
        if adam_w_mode and weight_decay != 0:
            update = update + weight_decay * p32
        p.copy_(p32 - lr * update)
        m.copy_(m32)
        v.copy_(v32)


class CpuFusedAdam(FusedAdam):

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8, adam_w_mode=True,
                 weight_decay=0.0, set_grad_none=True):
        defaults = dict(lr=lr, bias_correction=bias_correction, betas=betas, eps=eps, weight_decay=weight_decay)
        torch.optim.Optimizer.__init__(self, params, defaults)  # FusedAdam.__init__ would build the CUDA op
        self.adam_w_mode = 1 if adam_w_mode else 0
        self.set_grad_none = set_grad_none
        self._dummy_overflow_buf = torch.zeros(1, dtype=torch.int32)
        self.multi_tensor_adam = _adam_kernel


def install():
    original = deepspeed.initialize

    def initialize(*args, model_parameters=None, config=None, optimizer=None, **kwargs):
        if optimizer is None and isinstance(config, dict) and "optimizer" in config:
            config = dict(config)
            spec = config.pop("optimizer")
            p = dict(spec.get("params", {}))
            p.pop("torch_adam", None)
            adam_w = spec.get("type", "AdamW").lower() == "adamw"
            optimizer = CpuFusedAdam(model_parameters, lr=p.get("lr", 1e-3), betas=tuple(p.get("betas", (0.9, 0.999))),
                                     eps=p.get("eps", 1e-8), weight_decay=p.get("weight_decay", 0.0),
                                     adam_w_mode=adam_w)
        return original(*args, model_parameters=model_parameters, config=config, optimizer=optimizer, **kwargs)

    deepspeed.initialize = initialize

