"""The CUDA cross-entropy over bf16 logits [N, V] under autocast, forward and backward, two ways side
by side (issue 15): "cast-first" as PyTorch's eager scripts and hwtrain before 2026-11-27 compute it
(the logits cast to fp32, then cross_entropy), and "half-to-float" as hwtrain's token_cross_entropy
now does (log-softmax reads the bf16 logits and writes fp32; its backward writes the bf16 gradient).
For each: the peak in fp32 copies of the logits above the bf16 logits (the input's bf16 gradient,
0.5, included), the median time of a forward and backward, and whether loss and gradient equal
cast-first's bit for bit. Usage: python3 bench/ce_memory.py [N] [V]"""
import statistics
import sys

import torch
import torch.nn.functional as F

N = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
V = int(sys.argv[2]) if len(sys.argv) > 2 else 50304
torch.manual_seed(0)
x0 = (3 * torch.randn(N, V, device="cuda", dtype=torch.bfloat16)).requires_grad_(True)
y = torch.randint(0, V, (N,), device="cuda")


def cast_first(x):
    return F.cross_entropy(x.float(), y)


def half_to_float(x):
    return F.nll_loss(torch._log_softmax(x, -1, True), y)


def run(fn):
    x0.grad = None
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = fn(x0)
    loss.backward()
    return loss.detach(), x0.grad


results = {}
for name, fn in (("cast-first", cast_first), ("half-to-float", half_to_float)):
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
    print(f"cross-entropy {name} N={N} V={V}: peak {copies:.2f} fp32 logit copies above the bf16 logits, "
          f"forward+backward {statistics.median(times):.2f} ms (median of 15){same}")
