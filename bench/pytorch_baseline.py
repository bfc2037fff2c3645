"""Plain PyTorch (Python) training of the same GPT as hwtrain, for side-by-side speed comparisons.

A nanoGPT-style model (or, with --arch llama, hwtrain's Llama block: RMSNorm, rotary positions,
grouped-query attention, SwiGLU, untied head, no biases) and loop, hand-tunable from the command line (precision, threads, fused
AdamW), reading the same .hwt token file hwtrain trains on. Prints one line:
    pytorch <mode> tokens/s <median> step_ms <median> loss <last>
Usage: python3 bench/pytorch_baseline.py --data FILE.hwt --n-layer 6 --n-head 6 --n-embd 384 \
           --block 256 --batch 12 --steps 30 --warmup 5 --dtype bf16 --threads 2
"""
import argparse
import math
import statistics
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HEADER = 256


def load_tokens(path):
    raw = np.fromfile(path, dtype=np.uint8, count=HEADER)
    dtype_bytes = int(raw[20]) | (int(raw[21]) << 8)
    n_train = int(np.frombuffer(raw[32:40].tobytes(), dtype=np.int64)[0])
    dtype = np.uint16 if dtype_bytes == 2 else np.uint32
    data = np.memmap(path, dtype=dtype, mode="r", offset=HEADER)
    return data[:n_train]


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, 4 * c)
        self.proj = nn.Linear(4 * c, c)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, n_embd):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def rotary(T, D, theta, device):
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, device=device).float() / D))
    f = torch.outer(torch.arange(T, device=device).float(), inv)
    emb = torch.cat([f, f], dim=-1)
    return emb.cos(), emb.sin()


def rotate(x, cos, sin):  # rotate_half, as Hugging Face's Llama
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, c, h, kv, inter, eps):
        super().__init__()
        self.h, self.kv, self.d = h, kv, c // h
        self.attn_norm = nn.RMSNorm(c, eps=eps)
        self.wq = nn.Linear(c, h * self.d, bias=False)
        self.wk = nn.Linear(c, kv * self.d, bias=False)
        self.wv = nn.Linear(c, kv * self.d, bias=False)
        self.wo = nn.Linear(c, c, bias=False)
        self.ffn_norm = nn.RMSNorm(c, eps=eps)
        self.w1 = nn.Linear(c, inter, bias=False)
        self.w3 = nn.Linear(c, inter, bias=False)
        self.w2 = nn.Linear(inter, c, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        n = self.attn_norm(x)
        q = rotate(self.wq(n).view(B, T, self.h, self.d).transpose(1, 2), cos, sin)
        k = rotate(self.wk(n).view(B, T, self.kv, self.d).transpose(1, 2), cos, sin)
        v = self.wv(n).view(B, T, self.kv, self.d).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv != self.h)
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, C))
        n = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(n)) * self.w3(n))


class Llama(nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, n_embd, n_kv_head, inter, theta=10000.0, eps=1e-5):
        super().__init__()
        self.tok = nn.Embedding(vocab, n_embd)
        self.layers = nn.ModuleList([LlamaBlock(n_embd, n_head, n_kv_head, inter, eps) for _ in range(n_layer)])
        self.norm = nn.RMSNorm(n_embd, eps=eps)
        self.head = nn.Linear(n_embd, vocab, bias=False)
        cos, sin = rotary(block, n_embd // n_head, theta, "cpu")
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.apply(GPT._init)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.tok(idx)
        for layer in self.layers:
            x = layer(x, self.cos[:T], self.sin[:T])
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--n-layer", type=int, default=6)
    p.add_argument("--n-head", type=int, default=6)
    p.add_argument("--n-embd", type=int, default=384)
    p.add_argument("--arch", choices=["gpt2", "llama"], default="gpt2")
    p.add_argument("--n-kv-head", type=int, default=0, help="llama: key/value heads; 0 = n_head")
    p.add_argument("--intermediate", type=int, default=0, help="llama: SwiGLU width; 0 = 8/3 n_embd rounded up to 256")
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--vocab", type=int, default=320)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--threads", type=int, default=0, help="0 = PyTorch's default")
    p.add_argument("--fused", action="store_true", help="fused AdamW")
    p.add_argument("--trace", default="", help="write a Kineto (Chrome) trace of 3 steps after warm-up here")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--tf32", action="store_true", help="CUDA: TF32 matmuls (PyTorch's default is off)")
    a = p.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1337)
    tokens = load_tokens(a.data)
    if a.arch == "llama":
        inter = a.intermediate or (2 * 4 * a.n_embd // 3 + 255) // 256 * 256
        model = Llama(a.vocab, a.block, a.n_layer, a.n_head, a.n_embd, a.n_kv_head or a.n_head, inter).to(dev)
    else:
        model = GPT(a.vocab, a.block, a.n_layer, a.n_head, a.n_embd).to(dev)
    if a.compile:
        model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, fused=a.fused or None)
    rng = np.random.default_rng(0)
    times, loss = [], float("nan")
    prof = None
    for step in range(a.warmup + a.steps):
        if a.trace and step == a.warmup - 1:  # one profiler warm-up step, then 3 recorded (ProfilerStep#)
            acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev.type == "cuda" else [])
            prof = torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=0, warmup=1, active=3, repeat=1),
                                          on_trace_ready=lambda p: p.export_chrome_trace(a.trace))
            prof.start()
        elif prof is not None:
            prof.step()
            if step == a.warmup + 3:
                prof.stop()
                prof = None
        t0 = time.perf_counter()
        ix = rng.integers(0, len(tokens) - a.block - 1, size=a.batch)
        x = torch.from_numpy(np.stack([tokens[i:i + a.block] for i in ix]).astype(np.int64)).to(dev)
        y = torch.from_numpy(np.stack([tokens[i + 1:i + 1 + a.block] for i in ix]).astype(np.int64)).to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            l = model(x, y)
        l.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss = l.item()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    if dev.type == "cuda":
        print(f"pytorch peak_memory_bytes {torch.cuda.max_memory_allocated()}")
    mode = f"{a.device}-{a.dtype}{'-fused' if a.fused else ''}{'-compile' if a.compile else ''}-t{torch.get_num_threads()}"
    print(f"pytorch {mode} tokens/s {a.batch * a.block / med:.0f} step_ms {med * 1000:.1f} loss {loss:.4f}")


if __name__ == "__main__":
    main()
