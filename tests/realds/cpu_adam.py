"""DeepSpeed's DeepSpeedCPUAdam without its JIT-built C++ op (cpu_adam), so that ZeRO's 16-bit master weights
(fp16_master_weights_and_grads, bf16_master_weights_and_grads with CPU offload, bf16_optimizer_states) can be
written on these machines without minutes of compiling per fresh CI run.

ZeRO checks `type(optimizer) == DeepSpeedCPUAdam` (a subclass is refused), so the class is DeepSpeed's own: only
the op that its constructor loads (CPUAdamBuilder().load()) is replaced by TorchCpuAdamOp, which does
csrc/adam/cpu_adam_impl.cpp's per-element arithmetic in torch: every value read as fp32, the update in fp32, the
results stored back in the tensors' own dtypes (params fp32/fp16/bf16, moments fp32 or the params' dtype) with
round-to-nearest-even, as the kernel's stores do. Not bit-identical to the AVX kernel (which fuses multiply-adds),
the same formula and dtypes. install() also drops "torch_adam" from the config so that the engine builds
DeepSpeedCPUAdam for offload_optimizer."""
import numpy as np
import torch

import deepspeed
import deepspeed.ops.adam.cpu_adam as ds_cpu_adam


class _Opt:
    """Adam_Optimizer's state (csrc/includes/cpu_adam.h): fp32 scalars, beta powers kept by IncrementStep."""

    def __init__(self, lr, beta1, beta2, eps, weight_decay, adamw_mode):
        f = np.float32
        self.alpha, self.beta1, self.beta2, self.eps = f(lr), f(beta1), f(beta2), f(eps)
        self.weight_decay, self.adamw_mode = f(weight_decay), bool(adamw_mode)
        self.step, self.beta1_t, self.beta2_t = 0, f(1.0), f(1.0)

    def increment_step(self, step, beta1, beta2):
        f = np.float32
        if f(beta1) != self.beta1 or f(beta2) != self.beta2:
            self.step, self.beta1, self.beta2 = step, f(beta1), f(beta2)
            self.beta1_t, self.beta2_t = f(self.beta1**step), f(self.beta2**step)
        elif step == self.step + 1:
            self.step += 1
            self.beta1_t, self.beta2_t = f(self.beta1_t * self.beta1), f(self.beta2_t * self.beta2)
        elif step != self.step:
            self.beta1_t, self.beta2_t = f(self.beta1**step), f(self.beta2**step)
            self.step = step


class TorchCpuAdamOp:
    """The cpu_adam op's Python interface (create_adam, adam_update, destroy_adam) in torch."""

    def __init__(self):
        self.optimizers = {}

    def create_adam(self, opt_id, lr, beta1, beta2, eps, weight_decay, adamw_mode, should_log):
        del should_log
        self.optimizers[opt_id] = _Opt(lr, beta1, beta2, eps, weight_decay, adamw_mode)
        return 0

    def destroy_adam(self, opt_id):
        self.optimizers.pop(opt_id, None)
        return 0

    def adam_update(self, opt_id, step, lr, beta1, beta2, eps, weight_decay, bias_correction, params, grads, exp_avg,
                    exp_avg_sq):
        supported = {(torch.half, torch.float), (torch.half, torch.half), (torch.bfloat16, torch.float),
                     (torch.bfloat16, torch.bfloat16), (torch.float, torch.float)}
        if (params.dtype, exp_avg.dtype) not in supported:  # the kernel's invoker table
            raise RuntimeError(f"Adam optimizer with param type {params.dtype} and state type {exp_avg.dtype} "
                               "is not supported")
        if not all(t.is_contiguous() for t in (params, grads, exp_avg, exp_avg_sq)):
            raise RuntimeError("cpu_adam stand-in: non-contiguous tensors (the kernel would update a copy)")
        o = self.optimizers[opt_id]
        o.increment_step(step, beta1, beta2)
        f = np.float32
        o.alpha, o.eps, o.weight_decay = f(lr), f(eps), f(weight_decay)
        bc1, bc2 = f(1.0), f(1.0)
        if bias_correction:
            bc1 = f(1) - o.beta1_t
            bc2 = f(1) / f(np.sqrt(f(1) - o.beta2_t))
        step_size = f(-1) * o.alpha / bc1
        w_decay = f(-1) * o.alpha * o.weight_decay

        grad, param = grads.float(), params.float()
        m, v = exp_avg.float(), exp_avg_sq.float()
        if o.weight_decay > 0 and not o.adamw_mode:
            grad = param * float(o.weight_decay) + grad
        m = grad * float(f(1) - o.beta1) + m * float(o.beta1)
        v = (grad * grad) * float(f(1) - o.beta2) + v * float(o.beta2)
        denom = v.sqrt() * float(bc2) + float(o.eps)
        update = m / denom
        if o.weight_decay > 0 and o.adamw_mode:
            param = param + param * float(w_decay)
        param = update * float(step_size) + param
        params.copy_(param)  # copy_ rounds to nearest even, as the kernel's stores
        exp_avg.copy_(m)
        exp_avg_sq.copy_(v)
        return 0


class _Builder:
    """Stands in for CPUAdamBuilder in deepspeed.ops.adam.cpu_adam: load() returns the torch op, no build."""
    _op = TorchCpuAdamOp()

    def load(self, verbose=True):
        del verbose
        return _Builder._op


def install():
    ds_cpu_adam.CPUAdamBuilder = _Builder
    original = deepspeed.initialize

    def initialize(*args, config=None, **kwargs):
        if isinstance(config, dict) and "optimizer" in config:
            config = dict(config)
            spec = dict(config["optimizer"])
            spec["params"] = {k: v for k, v in spec.get("params", {}).items() if k != "torch_adam"}
            config["optimizer"] = spec
        return original(*args, config=config, **kwargs)

    deepspeed.initialize = initialize
