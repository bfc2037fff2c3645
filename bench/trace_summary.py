#!/usr/bin/env python3
"""Side-by-side summary of Kineto (Chrome) traces of training steps on a GPU: hwtrain's
ops_trace.json (--profile-steps) and PyTorch's torch.profiler export. Per profiled step: the GPU
span, the time some kernel ran (busy), idle gaps, kernel count, and the kernels taking most time.
Usage: trace_summary.py LABEL=TRACE.json [LABEL=TRACE.json ...] [--top N]"""
import collections
import json
import sys


def load(path):
    events = json.load(open(path))["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    return gpu, steps


def busy_union(intervals):
    total, end = 0.0, -1e30
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def summarize(label, path, top):
    try:
        gpu, steps = load(path)
    except (OSError, ValueError, KeyError) as e:
        return [f"{label}: cannot read {path}: {e}"]
    if not gpu:
        return [f"{label}: no GPU events in {path}"]
    n = max(1, len({e["name"] for e in steps}))  # a step appears once per track (CPU, GPU annotation)
    start = min(e["ts"] for e in gpu)
    end = max(e["ts"] + e.get("dur", 0) for e in gpu)
    busy = busy_union([(e["ts"], e["ts"] + e.get("dur", 0)) for e in gpu])
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for e in gpu:
        by_name[e["name"]][0] += 1
        by_name[e["name"]][1] += e.get("dur", 0)
    out = [f"{label}: {n} steps; per step: GPU span {(end - start) / n / 1e3:.2f} ms, kernels busy "
           f"{busy / n / 1e3:.2f} ms ({100 * busy / (end - start):.1f}%), {len(gpu) / n:.0f} GPU events"]
    for name, (calls, dur) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append(f"  {dur / n / 1e3:8.3f} ms {calls / n:6.1f}x  {name[:110]}")
    return out


def main():
    top = 15
    args = sys.argv[1:]
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i:i + 2]
    for a in args:
        label, path = a.split("=", 1)
        print("\n".join(summarize(label, path, top)))
        print()


if __name__ == "__main__":
    main()
