#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): a tiny Llama-shaped megatron-core GPTModel (RMSNorm, SwiGLU,
RoPE, 4 heads in 2 query groups, no biases, untied output layer; the local layer spec) at tensor-parallel size 2 on
gloo, stepped with torch's Adam on synthetic gradients (the forward needs CUDA: megatron_train.py), saved with
megatron.core.dist_checkpointing.save (torch_dist) as <out>/iter_0000002/ and latest_checkpointed_iteration.txt.

Llama-shaped because Megatron Bridge's Megatron -> Hugging Face export (megatron_bridge_export.py) maps Llama
(LlamaBridge) and nothing like megatron_train.py's GPT (learned positions, LayerNorm, GeLU, biases). The shape
constants are shared with that exporter (LLAMA below): the two must build the same model.

usage: launch.py --world 2 -- megatron_llama_train.py --out SAVE [--tp 2] [--steps 2] [--json RUN_JSON]
"""
import argparse
import json
import os

import torch
import torch.distributed as dist

# The model both sides build; vocab 128 is already a multiple of Megatron Bridge's make_vocab_size_divisible_by
# (128), so its padded vocabulary is the saved one.
LLAMA = dict(num_layers=2, hidden_size=16, num_attention_heads=4, num_query_groups=2, ffn_hidden_size=32,
             vocab_size=128, max_position_embeddings=16, norm_epsilon=1e-5, rotary_base=10000)


def transformer_config(config_class, **extra):
    """megatron-core's TransformerConfig (or a subclass) with LLAMA's shape."""
    import torch.nn.functional as F
    return config_class(num_layers=LLAMA["num_layers"], hidden_size=LLAMA["hidden_size"],
                        num_attention_heads=LLAMA["num_attention_heads"],
                        num_query_groups=LLAMA["num_query_groups"], ffn_hidden_size=LLAMA["ffn_hidden_size"],
                        normalization="RMSNorm", layernorm_epsilon=LLAMA["norm_epsilon"], gated_linear_unit=True,
                        activation_func=F.silu, add_bias_linear=False, add_qkv_bias=False,
                        use_cpu_initialization=True, params_dtype=torch.float32, perform_initialization=True,
                        **extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    notes = {}
    if not torch.cuda.is_available():  # the two CUDA calls of the torch_dist save (megatron_train.py says where)
        torch.cuda.synchronize = lambda *args, **kwargs: None
        torch.cuda.current_device = lambda: "cpu"
        notes["cpu_shims"] = ["torch.cuda.synchronize: no-op", "torch.cuda.current_device: 'cpu'"]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    from megatron.core import dist_checkpointing, parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=a.tp)
    torch.manual_seed(11)
    model = GPTModel(config=transformer_config(TransformerConfig),
                     transformer_layer_spec=get_gpt_layer_local_spec(normalization="RMSNorm"),
                     vocab_size=LLAMA["vocab_size"], max_sequence_length=LLAMA["max_position_embeddings"],
                     position_embedding_type="rope", rotary_base=LLAMA["rotary_base"],
                     share_embeddings_and_output_weights=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(a.steps):  # synthetic gradients, the same on every replica of a param
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(400 + step)) * 1e-2
        optimizer.step()
        optimizer.zero_grad()
    state = {"model": model.sharded_state_dict(), "checkpoint_version": 3.0, "iteration": a.steps}
    iter_dir = os.path.join(a.out, f"iter_{a.steps:07d}")
    if rank == 0:
        os.makedirs(iter_dir, exist_ok=True)
    dist.barrier()
    dist_checkpointing.save(state, iter_dir)
    dist.barrier()
    if rank == 0:
        with open(os.path.join(a.out, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(a.steps))
        if a.json:
            import megatron.core
            with open(a.json, "w") as f:
                json.dump(dict(notes, tp=a.tp, iteration=a.steps, megatron_core=megatron.core.__version__,
                               params=sorted(n for n, _ in model.named_parameters())), f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
