#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): the transformer `ckptdoc synth --vocab V` writes, built as a
real torch model and trained a few steps by real DeepSpeed, then saved with engine.save_checkpoint. The synthetic
writer's layout is checked against this one (tests/realds/test_realds_synth_layout.cpp), so names, shapes, module
and registration order, param groups and the tied head follow the writer (core/src/sources/deepspeed/synthesize.cpp):

  rotary_inv_freq (a persistent buffer of hidden / 2 elements, on the root module)
  embed.weight [V, H]
  layers.L.{ln1, attn.qkv [3H, H], attn.out [H, H], ln2, mlp.up [4H, H], mlp.down [H, 4H]} (weights and biases)
  final_ln
  head.weight: the embedding itself (tied, as GPT-2 ties its lm_head), so DeepSpeed records it in shared_params
Param groups as the harness makes them: weights (2-D, weight decay 0.01) then biases and norms (no decay).

usage: launch.py --world N -- synth_recipe_train.py --out SAVE_DIR --stage 2 --dtype bf16 --vocab 61 --hidden 12
       --layers 2 [--steps 2] [--seed 1]
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import deepspeed
import deepspeed.comm as dist

import ds_common as C


class Attention(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.qkv = C.UpLinear(h, 3 * h)
        self.out = C.UpLinear(h, h)

    def forward(self, x):
        q, k, v = self.qkv(x).float().chunk(3, dim=-1)
        w = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
        return self.out((w @ v).to(x.dtype))


class Mlp(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.up = C.UpLinear(h, 4 * h)
        self.down = C.UpLinear(4 * h, h)

    def forward(self, x):
        return self.down(F.gelu(self.up(x).float()).to(x.dtype))


class Layer(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.ln1 = C.UpLayerNorm(h)
        self.attn = Attention(h)
        self.ln2 = C.UpLayerNorm(h)
        self.mlp = Mlp(h)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class SynthRecipe(nn.Module):
    def __init__(self, vocab, h, layers):
        super().__init__()
        inv = torch.pow(10000.0, -torch.arange(max(1, h // 2), dtype=torch.float32) / max(1, h // 2))
        self.register_buffer("rotary_inv_freq", inv)
        self.embed = nn.Embedding(vocab, h)
        self.layers = nn.ModuleList(Layer(h) for _ in range(layers))
        self.final_ln = C.UpLayerNorm(h)
        self.head = C.UpLinear(h, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(self.final_ln(x)).float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--stage", type=int, required=True)
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    C.cpu_gloo_patch()  # as ds_driver.py: the gloo backend name (DeepSpeed < 0.18.7 asks for oneCCL otherwise)
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(a.seed)
    model = SynthRecipe(a.vocab, a.hidden, a.layers)
    cfg = C.make_config(a.stage, a.dtype)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=C.param_groups(model), config=cfg)
    g = torch.Generator().manual_seed(a.seed * 1000 + dist.get_rank())
    for _ in range(a.steps):
        tokens = torch.randint(0, a.vocab, (4, 8), generator=g)
        targets = torch.randint(0, a.vocab, (4, 8), generator=g)
        loss = engine(tokens, targets)
        engine.backward(loss)
        engine.step()
    engine.save_checkpoint(a.out)
    dist.barrier()


if __name__ == "__main__":
    main()
