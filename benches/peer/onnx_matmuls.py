"""GPT-2 small's MLP products alone, against ONNX Runtime: 12 pairs of MatMul
([128, 768] @ [768, 3072], then @ [3072, 768]) chained, each with its own random weight, so
every weight comes from memory once a call, as in the model.

    cargo build --release -p thunder-onnx --example onnx_bench
    /work/venv/bin/python benches/peer/onnx_matmuls.py [--threads 2] [--reps 20]

Prints both medians and the rate; `THUNDER_CPU_SIMD_STREAM=0` in the environment runs the
products through the `gemm` crate instead of cpu-simd's streaming kernel.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def model(path):
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(12):
        for j, (k, n) in enumerate([(768, 3072), (3072, 768)]):
            name = f"w{i}_{j}"
            inits.append(numpy_helper.from_array(
                (rng.standard_normal((k, n)) * 0.02).astype(np.float32), name))
            nodes.append(helper.make_node("MatMul", [x, name], [f"y{i}_{j}"]))
            x = f"y{i}_{j}"
    graph = helper.make_graph(
        nodes, "matmuls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 768])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [128, 768])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return rng.standard_normal((128, 768)).astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    flops = 24 * 2 * 128 * 768 * 3072
    with tempfile.TemporaryDirectory() as work:
        path, xin = os.path.join(work, "matmuls.onnx"), os.path.join(work, "x.npy")
        x = model(path)
        np.save(xin, x)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = a.threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        for _ in range(3):
            sess.run(None, {"x": x})
        times = []
        for _ in range(a.reps):
            t = time.perf_counter()
            sess.run(None, {"x": x})
            times.append(time.perf_counter() - t)
        ort_ms = statistics.median(times) * 1e3
        exe = os.path.join(ROOT, "target", "release", "examples", "onnx_bench")
        env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads))
        res = subprocess.run([exe, path, str(a.reps), f"x={xin}"], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=True)
        thunder_ms = json.loads(res.stdout.strip().splitlines()[-1])["median_ms"]
    for who, ms in (("ORT", ort_ms), ("thunder", thunder_ms)):
        print(f"{who:8} {ms:8.2f} ms  {flops / ms / 1e6:6.0f} GFLOP/s")
    print(f"thunder / ORT {thunder_ms / ort_ms:.3f}x")


if __name__ == "__main__":
    main()
