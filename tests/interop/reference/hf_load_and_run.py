"""Loads a model directory with transformers' AutoModelForCausalLM (as a user would load what
`hwtrain export --format hf` wrote) and writes its fp32 logits for the token ids in IDS_FILE
(safetensors, tensor "ids") to OUT_FILE (tensor "logits"). Usage: hf_load_and_run.py DIR IDS_FILE OUT_FILE"""
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM


def main():
    model_dir, ids_file, out_file = sys.argv[1:4]
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        logits = model(load_file(ids_file)["ids"]).logits
    save_file({"logits": logits.contiguous()}, out_file)


if __name__ == "__main__":
    main()
