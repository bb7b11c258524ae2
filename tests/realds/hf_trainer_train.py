#!/usr/bin/env python3
"""A real Hugging Face Trainer run under DeepSpeed ZeRO on the CPU (the judge venv: transformers, accelerate and
DeepSpeed 0.19 from PyPI), started per rank by judge/launch.py. Nothing of the save is ours: transformers'
Trainer builds the engine through accelerate and writes OUT/checkpoint-K/ every SAVE steps as users get it
(config.json, generation_config.json, the 16-bit weights in model.safetensors where the Trainer can gather
them, latest, global_stepK/ from engine.save_checkpoint, trainer_state.json, rng_state_<rank>.pth, ...).

The model is a tiny Llama made from a config (no download): 2 layers, hidden 64, grouped-query attention,
with the input embedding tied to the head (--tied) or not. The data: fixed random token sequences.

  launch.py --world 2 -- hf_trainer_train.py --out OUT --stage 2|3 --steps N --save-steps K [--gather] [--tied]

--gather sets stage3_gather_16bit_weights_on_model_save: without it a ZeRO-3 Trainer saves no weights file at
all (transformers removes the empty one it wrote and says to use zero_to_fp32.py).
"""
import argparse

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

VOCAB, SEQ = 96, 16


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


def model_config(tied):
    return LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2 * SEQ,
                       tie_word_embeddings=tied)


def trainer(out, stage, steps, save_steps, gather, tied, callbacks=()):
    """The run's Trainer: the same recipe for the run that saves and for hf_trainer_resume_check.py."""
    torch.manual_seed(0)
    model = LlamaForCausalLM(model_config(tied))
    zero = {"stage": stage}
    if stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = gather
    # "auto" values are filled in by the Trainer from its arguments, as in the examples users copy; torch's AdamW
    # (torch_adam) because DeepSpeed's fused CPU Adam is a C++ extension the judge venv does not build
    ds_config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
                 "train_batch_size": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": zero,
                 "optimizer": {"type": "AdamW",
                               "params": {"lr": "auto", "weight_decay": "auto", "torch_adam": True}}}
    args = TrainingArguments(output_dir=out, max_steps=steps, save_steps=save_steps, per_device_train_batch_size=2,
                             learning_rate=1e-3, weight_decay=0.01, bf16=True, use_cpu=True, deepspeed=ds_config,
                             report_to=[], logging_steps=1, seed=0, lr_scheduler_type="constant")
    return Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=list(callbacks))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--stage", type=int, choices=(2, 3), required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--save-steps", type=int, default=2)
    ap.add_argument("--gather", action="store_true")
    ap.add_argument("--tied", action="store_true")
    a = ap.parse_args()
    trainer(a.out, a.stage, a.steps, a.save_steps, a.gather, a.tied).train()
    finish()


def finish():
    """Leaves the process group before the interpreter exits: left to exit on its own, a rank now and then aborts
    there ("terminate called without an active exception") after a complete run."""
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
