#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py with the Megatron Bridge venv's python, scripts/setup-judges.sh
--bridge): NVIDIA Megatron Bridge's own Megatron -> Hugging Face export of a megatron_llama_train.py save, the
reference that `ckptdoc export` is compared with (compare_bridge_export.py).

How, on the CPU over gloo at the save's tensor-parallel size: a Hugging Face Llama folder of LLAMA's shape is made
with transformers (random weights: Megatron Bridge's AutoBridge.from_hf_pretrained wants one as its template and
the folder it copies config and tokenizer files from); Bridge's provider builds the Megatron model with Bridge's
own local_layer_spec (Transformer Engine needs CUDA); megatron-core's dist_checkpointing.load reads the save into
it; AutoBridge.save_hf_weights writes the Hugging Face safetensors (its LlamaBridge mappings: QKV split per query
group, fc1 into gate/up, the TP shards gathered by Bridge).

Megatron Bridge 0.3.1 (the release for megatron-core 0.16) imports transformer_engine.pytorch at import time
(megatron/bridge/peft/lora_layers.py:20, lora.py:21; LoRA classes that subclass te.Linear) and TE's PyTorch
extension needs CUDA to build and to load. Nothing of it runs in this export (the local layer spec, no LoRA), so
the import is answered with a stub module whose every class raises when constructed; megatron-core is imported
first, so its own "is TE here" checks still see none. The stub is the only change; Bridge's code is run as shipped.

usage: launch.py --world 2 -- megatron_bridge_export.py --ckpt ITERATION_DIR --out HF_DIR [--tp 2] [--json OUT]
"""
import argparse
import json
import os
import sys
import types

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_llama_train import LLAMA  # noqa: E402 - the shape of the saved model


# What `import megatron.bridge` (0.3.1) imports of megatron-core 0.16.1: imported before the stub, so that each
# decides "no Transformer Engine" (attention.py's HAVE_TE, TELinear None) as on any CPU machine.
MCORE_MODULES_BRIDGE_IMPORTS = (
    "megatron.core.extensions.kitchen", "megatron.core.extensions.transformer_engine_spec_provider",
    "megatron.core.fusions.fused_bias_dropout", "megatron.core.fusions.fused_mla_yarn_rope_apply",
    "megatron.core.models.T5.t5_model", "megatron.core.models.gpt.gpt_layer_specs",
    "megatron.core.models.gpt.experimental_attention_variant_module_specs",
    "megatron.core.models.gpt.heterogeneous.heterogeneous_layer_specs", "megatron.core.models.gpt.moe_module_specs",
    "megatron.core.models.mamba.mamba_model", "megatron.core.models.mamba.mamba_layer_specs",
    "megatron.core.models.multimodal.llava_model", "megatron.core.models.vision.clip_vit_model",
    "megatron.core.models.vision.multimodal_projector", "megatron.core.models.vision.radio",
    "megatron.core.models.vision.vit_layer_specs", "megatron.core.post_training.modelopt.gpt.model_specs",
    "megatron.core.post_training.modelopt.layers", "megatron.core.post_training.modelopt.mamba.model_specs",
    "megatron.core.ssm.gated_delta_net", "megatron.core.ssm.mamba_block", "megatron.core.ssm.mamba_layer",
    "megatron.core.ssm.mamba_mixer", "megatron.core.ssm.mlp_layer", "megatron.core.transformer.attention",
    "megatron.core.transformer.custom_layers.transformer_engine",
    "megatron.core.transformer.experimental_attention_variant.dsa",
    "megatron.core.transformer.heterogeneous.heterogeneous_config",
    "megatron.core.transformer.heterogeneous.linear_replacements", "megatron.core.transformer.multi_latent_attention")


def stub_transformer_engine():
    """transformer_engine and transformer_engine.pytorch as modules whose every attribute is a class that raises
    when constructed (Bridge subclasses te.Linear at import time and names te.ops.* in annotations)."""

    class AbsentMeta(type(torch.nn.Module)):
        def __getattr__(cls, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return cls

    class Absent(torch.nn.Module, metaclass=AbsentMeta):
        def __init__(self, *args, **kwargs):
            raise RuntimeError("transformer_engine is a stub here (no CUDA): megatron_bridge_export.py")

    class AbsentModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Absent

    te, te_pytorch = AbsentModule("transformer_engine"), AbsentModule("transformer_engine.pytorch")
    te.pytorch = te_pytorch
    sys.modules["transformer_engine"], sys.modules["transformer_engine.pytorch"] = te, te_pytorch


def hf_template(folder):
    """A Hugging Face Llama folder of LLAMA's shape (random weights), Bridge's template."""
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=LLAMA["vocab_size"], hidden_size=LLAMA["hidden_size"],
                         intermediate_size=LLAMA["ffn_hidden_size"], num_hidden_layers=LLAMA["num_layers"],
                         num_attention_heads=LLAMA["num_attention_heads"],
                         num_key_value_heads=LLAMA["num_query_groups"],
                         max_position_embeddings=LLAMA["max_position_embeddings"], rms_norm_eps=LLAMA["norm_epsilon"],
                         rope_theta=LLAMA["rotary_base"], tie_word_embeddings=False, torch_dtype="float32",
                         architectures=["LlamaForCausalLM"])
    torch.manual_seed(3)
    LlamaForCausalLM(config).save_pretrained(folder)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    import importlib
    from megatron.core import dist_checkpointing, parallel_state
    for name in MCORE_MODULES_BRIDGE_IMPORTS:
        importlib.import_module(name)
    before_stub = set(sys.modules)
    stub_transformer_engine()
    import megatron.bridge
    # megatron-core modules that first came in with the stub present (they may take the stub for TE): named in
    # the report; none of them may build the model
    late = sorted(m for m in set(sys.modules) - before_stub if m.startswith("megatron.core."))
    from megatron.core.transformer import attention
    assert not attention.HAVE_TE, "megatron-core's attention took the stub for Transformer Engine"
    from megatron.bridge import AutoBridge
    from megatron.bridge.models.gpt_provider import local_layer_spec
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=a.tp)

    template = a.out + ".template"
    if rank == 0:
        hf_template(template)
    dist.barrier()
    bridge = AutoBridge.from_hf_pretrained(template)
    provider = bridge.to_megatron_provider(load_weights=False)
    provider.transformer_layer_spec = local_layer_spec
    provider.tensor_model_parallel_size = a.tp
    provider.params_dtype, provider.bf16, provider.fp16 = torch.float32, False, False
    # LlamaBridge asks for the fused kernels (TE or Apex, CUDA); they change how a forward runs, not the weights
    for fusion in ("apply_rope_fusion", "bias_activation_fusion", "masked_softmax_fusion", "persist_layer_norm",
                   "bias_dropout_fusion", "gradient_accumulation_fusion"):
        setattr(provider, fusion, False)
    provider.finalize()
    model = provider.provide_distributed_model(wrap_with_ddp=False, use_cpu_initialization=True)
    before = {n: p.detach().clone() for n, p in model[0].named_parameters()}
    loaded = dist_checkpointing.load({"model": model[0].sharded_state_dict()}, a.ckpt)
    model[0].load_state_dict(loaded["model"])
    changed = sum(not torch.equal(before[n], p) for n, p in model[0].named_parameters())
    bridge.save_hf_weights(model, a.out)  # the weights alone: save_hf_pretrained also wants a tokenizer
    dist.barrier()
    if rank == 0 and a.json:
        import megatron.core
        with open(a.json, "w") as f:
            json.dump(dict(megatron_bridge=megatron.bridge.__version__, megatron_core=megatron.core.__version__,
                           tp=a.tp, params=len(before), params_changed_by_load=changed,
                           mcore_modules_imported_after_stub=late,
                           files=sorted(os.listdir(a.out))), f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
