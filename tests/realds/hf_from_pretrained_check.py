#!/usr/bin/env python3
"""transformers' from_pretrained on a folder ckptdoc exported, judged against a reference state dict (DeepSpeed's
own zero_to_fp32.py output of the same checkpoint). Run with the judge venv's python.

  hf_from_pretrained_check.py FOLDER REFERENCE.bin

Checks: the folder loads as a model with no missing, unexpected or mismatched keys (as float32, the export's
dtype); every tensor of the reference is bit for bit the model's; a tied head shares the embedding's storage in
the loaded model; a forward pass gives a finite loss. Prints one line per failure and exits 1, or "ok" and 0.
"""
import sys

import torch
from transformers import AutoModelForCausalLM


def main():
    folder, reference = sys.argv[1], sys.argv[2]
    model, info = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, output_loading_info=True)
    failures = [f"{k}: {info[k]}" for k in ("missing_keys", "unexpected_keys", "mismatched_keys") if info.get(k)]
    ref = torch.load(reference, map_location="cpu", weights_only=True)
    sd = model.state_dict()
    if set(sd) != set(ref):
        failures.append(f"keys differ: only in the model {sorted(set(sd) - set(ref))}, "
                        f"only in the reference {sorted(set(ref) - set(sd))}")
    for name in sorted(set(sd) & set(ref)):
        if sd[name].dtype != ref[name].dtype or not torch.equal(sd[name], ref[name]):
            failures.append(f"{name}: differs from the reference ({sd[name].dtype} vs {ref[name].dtype})")
    if model.config.tie_word_embeddings and \
            model.get_output_embeddings().weight.data_ptr() != model.get_input_embeddings().weight.data_ptr():
        failures.append("the config ties the head to the embedding, but the loaded model holds two tensors")
    ids = torch.arange(16).remainder(model.config.vocab_size).unsqueeze(0)
    loss = model(input_ids=ids, labels=ids).loss
    if not torch.isfinite(loss):
        failures.append(f"forward pass loss {loss}")
    for f in failures:
        print(f)
    if failures:
        sys.exit(1)
    print(f"ok: {len(ref)} tensors equal, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
