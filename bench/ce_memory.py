"""The CUDA cross-entropy's memory peak in fp32 copies of the logits (issue 15's memory model):
bf16 logits [N, V] under autocast, as hwtrain's and PyTorch's eager loss compute it, forward and
backward; the peak over the inputs, divided by N x V x 4 bytes. Usage: python3 bench/ce_memory.py [N] [V]"""
import sys

import torch
import torch.nn.functional as F

N = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
V = int(sys.argv[2]) if len(sys.argv) > 2 else 50304
x = torch.randn(N, V, device="cuda", dtype=torch.bfloat16, requires_grad=True)
y = torch.randint(0, V, (N,), device="cuda")
torch.cuda.synchronize()
base = torch.cuda.memory_allocated()
torch.cuda.reset_peak_memory_stats()
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = F.cross_entropy(x, y)
loss.backward()
torch.cuda.synchronize()
copies = (torch.cuda.max_memory_allocated() - base) / (N * V * 4)
print(f"cross-entropy N={N} V={V}: peak {copies:.2f} fp32 logit copies above the bf16 logits "
      f"(the input's bf16 gradient, 0.5, included)")
