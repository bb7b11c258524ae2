#!/usr/bin/env python3
"""Judge of `ckptdoc export` of a megatron_llama_train.py save against Megatron Bridge's own Megatron -> Hugging
Face export of the same save (megatron_bridge_export.py): every tensor, bit for bit, after mapping the names.

  compare_bridge_export.py CKPTDOC_EXPORT BRIDGE_DIR

CKPTDOC_EXPORT is one .safetensors file or a folder of shards (--max-shard-size; every .safetensors in it).

ckptdoc writes the save's torch_dist keys (layer-stacked: decoder.layers.<name> holds every layer along dim 0);
Bridge writes Hugging Face Llama names. The mapping, per layer i (LlamaBridge's mapping_registry, read here as
the layout megatron-core saves):
  embedding.word_embeddings.weight                         -> model.embed_tokens.weight
  output_layer.weight                                      -> lm_head.weight
  decoder.final_layernorm.weight                           -> model.norm.weight
  decoder.layers.self_attention.linear_qkv.layer_norm_weight[i] -> model.layers.i.input_layernorm.weight
  decoder.layers.mlp.linear_fc1.layer_norm_weight[i]       -> model.layers.i.post_attention_layernorm.weight
  decoder.layers.self_attention.linear_proj.weight[i]      -> model.layers.i.self_attn.o_proj.weight
  decoder.layers.mlp.linear_fc2.weight[i]                  -> model.layers.i.mlp.down_proj.weight
  decoder.layers.mlp.linear_fc1.weight[i][:ffn] / [ffn:]   -> model.layers.i.mlp.gate_proj.weight / up_proj.weight
  decoder.layers.self_attention.linear_qkv.weight[i], rows grouped per query group as [the group's q heads, k, v]
    (each head_dim rows)                                   -> q_proj.weight / k_proj.weight / v_proj.weight
Every Bridge tensor must come from exactly one mapping and every ckptdoc tensor must be used; equal means the
same shape, dtype and bytes. Prints one JSON line; exit 1 on any difference. Run with the judges' venv.
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from megatron_llama_train import LLAMA  # noqa: E402 - the saved model's shape

LAYERS = "decoder.layers."


def tensors_of(path):
    """One safetensors file's tensors, or those of every .safetensors file in a folder (no name twice)."""
    if not os.path.isdir(path):
        return load_file(path)
    out = {}
    for name in sorted(os.listdir(path)):
        if name.endswith(".safetensors"):
            shard = load_file(os.path.join(path, name))
            assert not shard.keys() & out.keys(), f"{name} repeats {sorted(shard.keys() & out.keys())}"
            out.update(shard)
    return out


def expected_from_ckptdoc(ours):
    """The Hugging Face tensors the mapping makes of ckptdoc's export, and the ckptdoc names it used."""
    heads, groups = LLAMA["num_attention_heads"], LLAMA["num_query_groups"]
    head_dim = LLAMA["hidden_size"] // heads
    per_group = heads // groups
    ffn = LLAMA["ffn_hidden_size"]
    plain = {"embedding.word_embeddings.weight": "model.embed_tokens.weight", "output_layer.weight": "lm_head.weight",
             "decoder.final_layernorm.weight": "model.norm.weight"}
    per_layer = {"self_attention.linear_qkv.layer_norm_weight": "input_layernorm.weight",
                 "mlp.linear_fc1.layer_norm_weight": "post_attention_layernorm.weight",
                 "self_attention.linear_proj.weight": "self_attn.o_proj.weight",
                 "mlp.linear_fc2.weight": "mlp.down_proj.weight"}
    expected, used = {}, set()
    for src, dst in plain.items():
        expected[dst] = ours[src]
        used.add(src)
    for i in range(LLAMA["num_layers"]):
        hf = f"model.layers.{i}."
        for src, dst in per_layer.items():
            expected[hf + dst] = ours[LAYERS + src][i]
            used.add(LAYERS + src)
        fc1 = ours[LAYERS + "mlp.linear_fc1.weight"][i]
        expected[hf + "mlp.gate_proj.weight"], expected[hf + "mlp.up_proj.weight"] = fc1[:ffn], fc1[ffn:]
        qkv = ours[LAYERS + "self_attention.linear_qkv.weight"][i]
        qkv = qkv.reshape(groups, (per_group + 2) * head_dim, -1)
        q_rows = per_group * head_dim
        expected[hf + "self_attn.q_proj.weight"] = qkv[:, :q_rows].reshape(-1, qkv.shape[-1])
        expected[hf + "self_attn.k_proj.weight"] = qkv[:, q_rows:q_rows + head_dim].reshape(-1, qkv.shape[-1])
        expected[hf + "self_attn.v_proj.weight"] = qkv[:, q_rows + head_dim:].reshape(-1, qkv.shape[-1])
        used.update({LAYERS + "mlp.linear_fc1.weight", LAYERS + "self_attention.linear_qkv.weight"})
    return expected, used


def same_bits(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def main():
    ours, theirs = tensors_of(sys.argv[1]), tensors_of(sys.argv[2])
    expected, used = expected_from_ckptdoc(ours)
    differ = sorted(n for n in expected.keys() & theirs.keys() if not same_bits(expected[n], theirs[n]))
    report = dict(bridge_tensors=len(theirs), ckptdoc_tensors=len(ours),
                  ckptdoc_files=len([n for n in os.listdir(sys.argv[1]) if n.endswith(".safetensors")])
                  if os.path.isdir(sys.argv[1]) else 1, compared=len(expected.keys() & theirs.keys()),
                  equal=len(expected.keys() & theirs.keys()) - len(differ), differ=differ,
                  missing_in_bridge=sorted(expected.keys() - theirs.keys()),
                  not_mapped_from_ckptdoc=sorted(theirs.keys() - expected.keys()),
                  ckptdoc_unused=sorted(ours.keys() - used),
                  elements=sum(t.numel() for t in theirs.values()))
    report["ok"] = not (differ or report["missing_in_bridge"] or report["not_mapped_from_ckptdoc"]
                        or report["ckptdoc_unused"]) and report["compared"] > 0
    print(json.dumps(report, sort_keys=True))
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
