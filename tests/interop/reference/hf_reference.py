"""Writes reference tensors from Hugging Face transformers for hwtrain's equality tests
(tests/interop/hf_reference_test.cpp): for each tiny random-weight config (Llama, Qwen2, GPT-2), the
weights under Hugging Face's names, fp32 logits of a fixed batch (eval mode), the training loss on
that batch and every weight's gradient. Usage: hf_reference.py OUT_DIR; writes
OUT_DIR/<case>.safetensors, and OUT_DIR/<case>_hf/ as save_pretrained writes it (llama_gqa_rope3_hf
in shards of at most 100 kB)."""
import sys

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

VOCAB, T, B = 320, 24, 2  # 320 covers the byte tokenizer's 257 (the CLI test trains on bytes)

CASES = {
    # multi-head attention, no rope scaling
    "llama_mha": (LlamaForCausalLM, LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0,
        tie_word_embeddings=False, attention_bias=False)),
    # grouped-query attention (4 query heads share 2 key/value heads), Llama 3.1 rope scaling
    "llama_gqa_rope3": (LlamaForCausalLM, LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 16},
        tie_word_embeddings=False, attention_bias=False)),
    # Qwen2: q/k/v biases, tied head, eps 1e-6, theta 1e6
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=True, use_sliding_window=False)),
    # GPT-2: Conv1D weights stored (in, out), gelu_new, tied head, 32 learned positions
    "gpt2": (GPT2LMHeadModel, GPT2Config(
        vocab_size=VOCAB, n_positions=32, n_embd=64, n_layer=2, n_head=4, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
}


def main():
    out = sys.argv[1]
    for name, (cls, config) in CASES.items():
        torch.manual_seed(7)
        config._attn_implementation = "eager"
        model = cls(config).float()
        with torch.no_grad():  # norms start at one and biases at zero: move them, or a test could not see them
            for n, p in model.named_parameters():
                if "norm" in n or ".ln_" in n:
                    p.normal_(1.0, 0.2)
                elif n.endswith(".bias"):
                    p.normal_(0.0, 0.2)
        g = torch.Generator().manual_seed(11)
        ids = torch.randint(0, VOCAB, (B, T), generator=g)
        targets = torch.randint(0, VOCAB, (B, T), generator=g)
        model.eval()
        with torch.no_grad():
            logits = model(ids).logits
        model.train()
        loss = torch.nn.functional.cross_entropy(model(ids).logits.view(-1, VOCAB), targets.view(-1))
        loss.backward()
        tensors = {"ref.ids": ids, "ref.targets": targets, "ref.logits": logits, "ref.loss": loss.detach().reshape(1)}
        for n, p in model.named_parameters():  # a tied lm_head is not a parameter of its own
            tensors["weight." + n] = p.detach().contiguous()
            tensors["grad." + n] = p.grad.contiguous()
        save_file(tensors, f"{out}/{name}.safetensors")
        # every case as save_pretrained writes it (config.json included); the GQA Llama in shards
        model.save_pretrained(f"{out}/{name}_hf", max_shard_size="100KB" if name == "llama_gqa_rope3" else "5GB",
                              safe_serialization=True)


if __name__ == "__main__":
    main()
