"""The CUDA cross-entropy over 16-bit logits [N, V] under autocast, forward and backward, two ways side
by side (issue 15): "cast-first" as PyTorch's eager scripts compute it and hwtrain does for bf16 (the
logits cast to fp32, then cross_entropy), and "half-to-float" as hwtrain's token_cross_entropy does
for fp16 (log-softmax reads the fp16 logits and writes fp32; its backward writes the fp16 gradient;
CUDA's kernel refuses this conversion for bf16).
For each: the peak in fp32 copies of the logits above the bf16 logits (the input's bf16 gradient,
0.5, included), the median time of a forward and backward, and whether loss and gradient equal
cast-first's bit for bit. Usage: python3 bench/ce_memory.py [N] [V] [bf16|fp16]"""
import statistics
import sys

import torch
import torch.nn.functional as F

N = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
V = int(sys.argv[2]) if len(sys.argv) > 2 else 50304
DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16}[sys.argv[3] if len(sys.argv) > 3 else "bf16"]
torch.manual_seed(0)
x0 = (3 * torch.randn(N, V, device="cuda", dtype=DTYPE)).requires_grad_(True)
y = torch.randint(0, V, (N,), device="cuda")


def cast_first(x):
    return F.cross_entropy(x.float(), y)


def half_to_float(x):
    return F.nll_loss(torch._log_softmax(x, -1, True), y)


def run(fn):
    x0.grad = None
    with torch.autocast("cuda", dtype=DTYPE):
        loss = fn(x0)
    loss.backward()
    return loss.detach(), x0.grad


results = {}
variants = [("cast-first", cast_first)] + ([("half-to-float", half_to_float)] if DTYPE == torch.float16 else [])
for name, fn in variants:
    run(fn)
    x0.grad = None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss, grad = run(fn)
    torch.cuda.synchronize()
    copies = (torch.cuda.max_memory_allocated() - base) / (N * V * 4)
    times = []
    for _ in range(15):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        run(fn)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    results[name] = (loss, grad)
    same = ""
    if name != "cast-first":
        ref_loss, ref_grad = results["cast-first"]
        same = f"; loss and gradient equal cast-first's bit for bit: {bool(torch.equal(loss, ref_loss) and torch.equal(grad, ref_grad))}"
    print(f"cross-entropy {name} {DTYPE} N={N} V={V}: peak {copies:.2f} fp32 logit copies above the {sys.argv[3] if len(sys.argv) > 3 else 'bf16'} logits, "
          f"forward+backward {statistics.median(times):.2f} ms (median of 15){same}")
