#!/usr/bin/python3
"""A Hugging Face Trainer / Accelerate checkpoint-N/ folder written by real DeepSpeed (start it through the
harness's launch.py): model A trained N steps under ZeRO-3, then what the Trainer's _save_checkpoint leaves:

  OUT/checkpoint-N/latest, global_stepN/...   engine.save_checkpoint (DeepSpeed's own files, tag global_stepN)
  OUT/checkpoint-N/model.safetensors          --weights gathered:    engine.save_16bit_model() with
                                                stage3_gather_16bit_weights_on_model_save (DeepSpeed gathers the
                                                16-bit weights), stored as safetensors as save_pretrained does
                                              --weights placeholder: engine.module.state_dict() without gathering,
                                                the empty placeholders a ZeRO-3 save without that option writes
  OUT/checkpoint-N/config.json                {"hidden_size": 301, ...}, as save_pretrained writes it
  OUT/checkpoint-N/trainer_state.json         {"global_step": N, ...}

Usage: launch.py --world 2 -- trainer_driver.py --out OUT --steps N --weights gathered|placeholder
"""
import argparse
import json
import os
import struct
import sys

import torch

import deepspeed
import deepspeed.comm as dist

HARNESS = os.environ.get("CKPTDOC_HARNESS", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                          "deepspeed", "harness"))
sys.path.insert(0, HARNESS)
import ds_common as C  # noqa: E402

ST = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def save_safetensors(sd, path):
    """The safetensors layout by the spec (the safetensors package is not installed here)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in sd.items():
        t = t.detach().contiguous().cpu()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": ST[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--weights", choices=["gathered", "placeholder"], required=True)
    ap.add_argument("--dtype", default="fp16")
    a = ap.parse_args()
    C.cpu_gloo_patch()
    C.cpu_grad_bucketing_patch()
    deepspeed.init_distributed(dist_backend="gloo")
    dims = C.SMALL_DIMS
    engine, _ = C.build_engine(dims, 3, a.dtype, 1,
                               zero_extra={"stage3_gather_16bit_weights_on_model_save": a.weights == "gathered"})
    C.train_steps(engine, dims, a.dtype, a.steps, 7)
    folder = os.path.join(a.out, f"checkpoint-{a.steps}")
    engine.save_checkpoint(folder, tag=f"global_step{a.steps}")
    rank = dist.get_rank()
    if a.weights == "gathered":
        engine.save_16bit_model(folder, "pytorch_model.bin")  # collective: every rank gathers, rank 0 writes
        dist.barrier()
        if rank == 0:
            bin_path = os.path.join(folder, "pytorch_model.bin")
            save_safetensors(torch.load(bin_path, map_location="cpu"), os.path.join(folder, "model.safetensors"))
            os.remove(bin_path)
    elif rank == 0:
        save_safetensors(engine.module.state_dict(), os.path.join(folder, "model.safetensors"))
    if rank == 0:  # save_pretrained writes the model's config beside its weights
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({"model_type": "toy-mlp", "hidden_size": dims[1], "dims": dims}, f, indent=2)
        with open(os.path.join(folder, "trainer_state.json"), "w") as f:
            json.dump({"global_step": a.steps, "epoch": 1.0, "log_history": []}, f, indent=2)
    dist.barrier()


if __name__ == "__main__":
    main()
