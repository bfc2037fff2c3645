"""The tied embedding's backward (model/tied_embedding.h) in PyTorch, the kernels hwtrain calls:
the dense path (embedding_dense_backward over the whole vocabulary, then added to the head's
gradient) against the sparse one (unique ids, the same kernel over the renumbered ids, a coalesced
sparse tensor added in place). Prints the milliseconds each adds beyond copying the head's gradient.
Usage: python bench/tied_embedding_grad.py   (the venv's python: build/torch-python names it)
"""
import time
import warnings

import torch

warnings.filterwarnings("ignore", message="Sparse invariant checks")
torch.set_num_threads(2)


def run(vocab, width, tokens, reps=20):
    idx = torch.randint(vocab, (tokens,))
    grad = torch.randn(tokens, width)
    head = torch.randn(vocab, width)

    def dense():
        return head.clone().add_(torch.ops.aten.embedding_dense_backward(grad, idx, vocab, -1, False))

    def sparse():
        rows, renumbered = torch.unique(idx, sorted=True, return_inverse=True)
        sums = torch.ops.aten.embedding_dense_backward(grad, renumbered, rows.numel(), -1, False)
        rows_grad = torch.sparse_coo_tensor(rows.unsqueeze(0), sums, (vocab, width), is_coalesced=True)
        return head.clone().add_(rows_grad)

    ms = {}
    for name, f in [("copy", head.clone), ("dense", dense), ("sparse", sparse)]:
        for _ in range(3):
            f()
        start = time.perf_counter()
        for _ in range(reps):
            f()
        ms[name] = (time.perf_counter() - start) / reps * 1e3
    print(f"vocab {vocab} x {width}, {tokens} tokens: copying the head's gradient {ms['copy']:.2f} ms; "
          f"beyond it dense {ms['dense'] - ms['copy']:.2f} ms, sparse {ms['sparse'] - ms['copy']:.2f} ms")


run(50257, 768, 256)
run(50257, 768, 4096)
run(2048, 384, 4096)
run(256, 384, 3072)
