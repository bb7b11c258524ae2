#!/usr/bin/env python3
"""A real Hugging Face Trainer run without DeepSpeed on the CPU (the judge venv's transformers and torch), one
process: the Trainer writes OUT/checkpoint-K/ every SAVE steps with the optimizer state as transformers keeps it
then, `optimizer.pt` = torch.save(optimizer.state_dict()) (trainer.py `_save_optimizer_and_scheduler`), beside
model.safetensors, scheduler.pt, rng_state.pth, trainer_state.json and training_args.bin.

The model and data are hf_trainer_train.py's (a tiny Llama from a config, fixed random tokens), in fp32 with
torch's AdamW (the Trainer's default optimizer).

  hf_trainer_plain_train.py --out OUT --steps N --save-steps K
"""
import argparse

import torch
from transformers import LlamaForCausalLM, Trainer, TrainingArguments

from hf_trainer_train import Tokens, model_config


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--save-steps", type=int, default=2)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = LlamaForCausalLM(model_config(tied=False))
    args = TrainingArguments(output_dir=a.out, max_steps=a.steps, save_steps=a.save_steps,
                             per_device_train_batch_size=2, learning_rate=1e-3, weight_decay=0.01, use_cpu=True,
                             report_to=[], logging_steps=1, seed=0, lr_scheduler_type="constant",
                             optim="adamw_torch")
    Trainer(model=model, args=args, train_dataset=Tokens()).train()


if __name__ == "__main__":
    main()
