#!/usr/bin/env python3
"""ResNet-50's convolutions per class: thunder's THUNDER_CPU_SIMD_TRACE beside ONNX Runtime's
own session profile, the same minutes.

    resnet50_per_class.py ort MODEL INPUT.npy REPS > ort.txt      (ORT's profile, 2 threads)
    resnet50_per_class.py compare TRACE.log ort.txt              (the table)

TRACE.log is the stderr of `THUNDER_CPU_SIMD_TRACE=1 onnx_bench MODEL REPS pixels=INPUT.npy`.
Per class: ms summed over the class per call (ours: the best half of the last six calls).
"""
import collections
import json
import os
import re
import sys


def ort_profile(model, inp, reps):
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    x = np.load(inp)
    name = s.get_inputs()[0].name
    for _ in range(reps):
        s.run(None, {name: x})
    path = s.end_profiling()
    events = json.load(open(path))
    os.remove(path)
    by = collections.defaultdict(list)
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        a = e.get("args", {})
        shapes = [list(d.values())[0] for d in a.get("input_type_shape", [])][:2]
        by[(a.get("op_name"), json.dumps(shapes))].append(e["dur"])
    rows = []
    for k, v in by.items():
        # The first call (its first len(v)/reps events) left out.
        per = sum(v[len(v) // reps:]) / (reps - 1) if reps > 1 else sum(v)
        rows.append((per, k, len(v) // reps))
    rows.sort(reverse=True)
    for per, k, c in rows[:40]:
        print(f"{per/1000:8.2f} ms  x{c:3d}  {k[0]:20s} {k[1]}")
    print("total ms", sum(r[0] for r in rows) / 1000)


def ours(trace):
    convs = [l for l in open(trace).read().splitlines() if l.startswith("cpu-simd conv:")]
    per_call = max(len(convs) // 53, 1)  # ResNet-50 has 53 convolutions
    by = collections.defaultdict(list)
    for l in convs:
        m = re.match(r"cpu-simd conv:\s+([\d.]+) us.* in (\[[^\]]*\]) w (\[[^\]]*\])", l)
        if m:
            by[(m.group(2).replace(" ", ""), m.group(3).replace(" ", ""))].append(float(m.group(1)))
    out = {}
    for k, v in by.items():
        c = max(len(v) // per_call, 1)
        best = sorted(v[-6 * c:])[: 3 * c]
        out[k] = (sum(best) / 3 / 1000, c)
    return out


def compare(trace, ort_txt):
    res = ours(trace)
    ort = {}
    for l in open(ort_txt):
        m = re.match(r"\s*([\d.]+) ms\s+x\s*(\d+)\s+Conv\s+(\[\[.*\]\])", l)
        if m:
            sh = json.loads(m.group(3))
            ort[(str(sh[0]).replace(" ", ""), str(sh[1]).replace(" ", ""))] = float(m.group(1))
    tot = to = 0.0
    for k in sorted(res, key=lambda k: -res[k][0]):
        o = ort.get(k, float("nan"))
        to += o
        tot += res[k][0]
        print(f"{k[0]+' '+k[1]:42s} {res[k][0]:7.2f} ort {o:6.2f} x{res[k][1]}")
    print(f"total {tot:7.2f} ort {to:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["ort"]:
        ort_profile(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1:2] == ["compare"]:
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
