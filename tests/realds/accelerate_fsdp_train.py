#!/usr/bin/python3
"""Per-rank driver (started by the judges' launch.py): trains a tiny transformers GPT-2 under Hugging Face
Accelerate's FSDP plugin on the CPU over gloo, and saves it with accelerator.save_state(OUT).

Accelerate's PartialState reads RANK / WORLD_SIZE / MASTER_* from the launcher's env and, with no GPU, picks the
gloo backend (DistributedType.MULTI_CPU; the FSDP plugin is then dropped, see main()). SHARDED_STATE_DICT makes
save_state write the model and the optimizer as torch.distributed.checkpoint folders (pytorch_model_fsdp_0/,
optimizer_0/) plus scheduler.bin and random_states_<rank>.pkl.

--fsdp-version 1 does not run on the CPU: Accelerate passes device_id=self.device (accelerator.py:1930) and torch
2.10's FSDP1 refuses it ("ValueError: Inconsistent compute device and `device_id` on rank 0: cpu vs cpu:0",
torch/distributed/fsdp/_init_utils.py:1088).

usage: launch.py --world 2 -- accelerate_fsdp_train.py --out SAVE_DIR [--ref REF_DIR] [--fsdp-version 2] [--steps 3]
       [--seed 1] [--json RUN_JSON]
"""
import argparse
import json
import os

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--fsdp-version", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--ref", help="rank 0 writes accelerate's merge_fsdp_weights of pytorch_model_fsdp_0/ here: "
                                  "model.safetensors and pytorch_model.bin")
    ap.add_argument("--no-plugin-on-cpu", dest="plugin_on_cpu", action="store_false",
                    help="leave Accelerate's MULTI_CPU choice alone (it then saves as DDP)")
    a = ap.parse_args()

    from accelerate import Accelerator, FullyShardedDataParallelPlugin
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, set_seed
    from transformers import GPT2Config, GPT2LMHeadModel

    set_seed(a.seed)
    # Tiny but real: embeddings, tied lm_head, 2 blocks; shapes not all divisible by 2 (vocab 101) so FSDP's
    # dim-0 shards are uneven.
    cfg = GPT2Config(vocab_size=101, n_positions=32, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg)
    plugin = FullyShardedDataParallelPlugin(fsdp_version=a.fsdp_version, state_dict_type="SHARDED_STATE_DICT",
                                            auto_wrap_policy="transformer_based_wrap",
                                            transformer_cls_names_to_wrap=["GPT2Block"],
                                            reshard_after_forward=True if a.fsdp_version == 2 else "FULL_SHARD",
                                            cpu_ram_efficient_loading=False)
    acc = Accelerator(fsdp_plugin=plugin, cpu=True)
    state = acc.state
    ignored = state.distributed_type == DistributedType.MULTI_CPU
    if ignored and a.plugin_on_cpu:
        # Accelerate 1.16 drops the plugin on the CPU without a word: AcceleratorState.__init__ (state.py:947-977)
        # sets DistributedType.FSDP and keeps fsdp_plugin only for the MULTI_GPU/NPU/XPU/... types, so a gloo run
        # is MULTI_CPU and prepare/save_state would be plain DDP (model.safetensors, optimizer.bin). These
        # assignments are what state.py:974-977 and :998 do on a GPU (PartialState's copy too: every later
        # AcceleratorState() re-reads it); prepare, the FSDP wrapping and save_state below are Accelerate's own.
        state.distributed_type = DistributedType.FSDP
        state.fsdp_plugin = plugin
        PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    model, opt, sched = acc.prepare(model, opt, sched)
    g = torch.Generator().manual_seed(a.seed + acc.process_index)
    losses = []
    for _ in range(a.steps):
        ids = torch.randint(0, cfg.vocab_size, (2, 16), generator=g)
        out = model(input_ids=ids, labels=ids)
        acc.backward(out.loss)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(float(out.loss.detach()))
    acc.save_state(a.out)
    acc.wait_for_everyone()
    if a.ref:  # every rank: it ends in a barrier; the main process writes
        # What `accelerate merge-weights DIR OUT [--unsafe_serialization]` runs (commands/merge.py).
        from accelerate.utils import merge_fsdp_weights
        model_dir = os.path.join(a.out, "pytorch_model_fsdp_0")
        merge_fsdp_weights(model_dir, a.ref, safe_serialization=True)
        merge_fsdp_weights(model_dir, a.ref, safe_serialization=False)
    if a.json and acc.is_main_process:
        import accelerate
        import transformers
        with open(a.json, "w") as f:
            json.dump({"world": acc.num_processes, "backend": state.backend,
                       "distributed_type": str(state.distributed_type), "plugin_ignored_on_cpu": ignored,
                       "fsdp_version": a.fsdp_version,
                       "losses": losses, "steps": a.steps, "accelerate": accelerate.__version__,
                       "transformers": transformers.__version__, "torch": torch.__version__,
                       "files": sorted(os.path.relpath(os.path.join(d, n), a.out)
                                       for d, _, ns in os.walk(a.out) for n in ns)}, f, indent=1)
    acc.end_training()


if __name__ == "__main__":
    main()
