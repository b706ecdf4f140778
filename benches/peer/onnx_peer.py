"""thunder-rs against ONNX Runtime (CPU execution provider) on the same ONNX files and inputs,
with the same thread count, in one run.

    cargo build --release -p thunder-interpreter -p thunder-cpu-simd
    cargo build --release -p thunder-onnx --example onnx_bench
    (two commands: with `--example`, cargo builds only that example, not the plugins)
    /work/venv/bin/python benches/peer/onnx_peer.py [--threads 2] [--only minilm,gpt2,resnet50]
        [--device cuda:0 --bin DIR --config plugins-gpu.toml]

Models are random-weight PyTorch modules (scripts/onnx_models.py) at full size, exported with
PyTorch's ONNX exporter into --work (not committed): a MiniLM-size BERT (6 layers, hidden 384,
batch 8, sequence 128), GPT-2 small (12 layers, hidden 768, batch 1 and 8, sequence 128) and
ResNet-50 (batch 1 and 8, 224x224). For each: steady-state median latency of both, the ratio
thunder / ORT (<= 1.0 is the target), the first call (thunder: load + translate + compile +
run; ORT: session creation + run) and the largest output difference relative to ORT's scale.

With --device cuda:0 (scripts/gpu/onnx_cuda.sh): ORT's CUDA execution provider when the
installed onnxruntime has it, PyTorch eager on the same modules (inputs already on the GPU,
no_grad), and thunder (`ONNX_BENCH_DEVICE`; host inputs copied each call, outputs left on the
GPU; ORT copies both ways).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from onnx_models import Bert, Gpt2, ResNet  # noqa: E402


def export(model, args, path, names, dynamic_batch):
    if os.path.exists(path):
        return
    model.eval()
    t = time.time()
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=names, dynamo=False,
                          opset_version=17, output_names=["output"],
                          dynamic_axes={n: {0: "batch"} for n in names} if dynamic_batch else None)
    print(f"  exported {path} in {time.time() - t:.1f} s", flush=True)


def models(work, only, keep_modules=False):
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    out = []
    if "minilm" in only:
        path = os.path.join(work, "minilm.onnx")
        bert = Bert(vocab=30522, hidden=384, layers=6, heads=12, ffn=1536, max_pos=512)
        ids = rng.integers(0, 30522, size=(8, 128), dtype=np.int64)
        mask = np.ones((8, 128), dtype=np.int64)
        export(bert, (torch.from_numpy(ids), torch.from_numpy(mask)), path,
               ["input_ids", "attention_mask"], True)
        out.append(("minilm b8 s128", path, {"input_ids": ids, "attention_mask": mask}, bert))
    if "gpt2" in only:
        path = os.path.join(work, "gpt2.onnx")
        gpt = Gpt2(vocab=50257, hidden=768, layers=12, heads=12, max_pos=1024)
        for b in (1, 8):
            ids = rng.integers(0, 50257, size=(b, 128), dtype=np.int64)
            export(gpt, (torch.from_numpy(ids),), path, ["input_ids"], True)
            out.append((f"gpt2 b{b} s128", path, {"input_ids": ids}, gpt))
    if "resnet50" in only:
        path = os.path.join(work, "resnet50.onnx")
        net = ResNet(widths=(64, 128, 256, 512), blocks=(3, 4, 6, 3), bottleneck=True)
        for b in (1, 8):
            x = rng.standard_normal((b, 3, 224, 224), dtype=np.float32)
            export(net, (torch.from_numpy(x),), path, ["pixels"], True)
            out.append((f"resnet50 b{b}", path, {"pixels": x}, net))
    return out


def time_ort(path, feeds, threads, reps, device="cpu"):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    t = time.perf_counter()
    providers = ["CPUExecutionProvider"]
    if device.startswith("cuda"):
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise RuntimeError(f"this onnxruntime has no CUDA provider ({ort.get_available_providers()})")
        providers = ["CUDAExecutionProvider"]
    sess = ort.InferenceSession(path, opts, providers=providers)
    out = sess.run(None, feeds)
    first = (time.perf_counter() - t) * 1e3
    times = []
    cpu = time.process_time()
    for _ in range(reps):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    time_ort.cpu_ms = (time.process_time() - cpu) / max(reps, 1) * 1e3
    return first, statistics.median(times), min(times), out


def time_torch(module, feeds, device, reps):
    """PyTorch eager on the module the file was exported from, inputs already on the device."""
    module = module.to(device).eval()
    args = [torch.from_numpy(v).to(device) for v in feeds.values()]
    with torch.no_grad():
        t = time.perf_counter()
        out = module(*args)
        torch.cuda.synchronize()
        first = (time.perf_counter() - t) * 1e3
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            module(*args)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1e3)
    out = out[0] if isinstance(out, (tuple, list)) else out
    return first, statistics.median(times), min(times), out.float().cpu().numpy()


def time_thunder(path, feeds, threads, reps, work, device="cpu", bin_dir=None, config=None):
    files = []
    for k, v in feeds.items():
        stem = os.path.splitext(os.path.basename(path))[0]
        f = os.path.join(work, f"in_{stem}_{k}_{'x'.join(map(str, v.shape))}.npy")
        np.save(f, v)
        files.append(f"{k}={f}")
    outdir = os.path.join(work, "thunder_out")
    os.makedirs(outdir, exist_ok=True)
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), ONNX_BENCH_OUT=outdir,
               THUNDER_CONFIG=config or os.path.join(ROOT, "plugins.toml"), ONNX_BENCH_DEVICE=device)
    exe = os.path.join(bin_dir or os.path.join(ROOT, "target", "release", "examples"), "onnx_bench")
    res = subprocess.run([exe, path, str(reps), *files], env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(res.stderr.strip().splitlines()[-1] if res.stderr else "failed")
    stats = json.loads(res.stdout.strip().splitlines()[-1])
    out = np.load(os.path.join(outdir, "output.npy"))
    return stats, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--work", default="/tmp/thunder_onnx_peer")
    p.add_argument("--only", default="minilm,gpt2,resnet50")
    p.add_argument("--device", default="cpu")
    p.add_argument("--bin", help="folder holding onnx_bench (default target/release/examples)")
    p.add_argument("--config", help="plugins.toml for thunder (default the repo's)")
    p.add_argument("--rounds", type=int, default=1,
                   help="time ORT and thunder this many times each, alternating, and report the "
                        "median of the rounds' ratios (a shared machine's speed can change "
                        "between the two peers' runs)")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.set_num_threads(a.threads)
    print(f"threads {a.threads}, ORT {ort.__version__}, device {a.device}, median of {a.reps} after a first call")
    rows = []
    cuda = a.device.startswith("cuda")
    for name, path, feeds, module in models(a.work, a.only.split(",")):
        row = dict(model=name, device=a.device)
        ref = None
        rounds = []
        failed = False
        for _ in range(max(a.rounds, 1)):
            try:
                o_first, o_med, o_min, o_out = time_ort(path, feeds, a.threads, a.reps, a.device)
                ref = o_out[0]
                row.update(ort_ms=o_med, ort_min_ms=o_min, ort_first_ms=o_first,
                           ort_cpu_ms=getattr(time_ort, "cpu_ms", None))
            except Exception as e:  # noqa: BLE001 (a missing provider is reported, not fatal)
                print(f"{name}: ORT failed: {e}", flush=True)
                if not cuda:
                    failed = True
                    break
            if cuda and "torch_eager_ms" not in row:
                e_first, e_med, e_min, e_out = time_torch(module, feeds, a.device, a.reps)
                ref = e_out if ref is None else ref
                row.update(torch_eager_ms=e_med, torch_eager_min_ms=e_min, torch_eager_first_ms=e_first)
                print(f"{name:16s} torch eager {e_med:9.2f} ms (min {e_min:.2f}, first {e_first:.1f})", flush=True)
            try:
                stats, t_out = time_thunder(path, feeds, a.threads, a.reps, a.work, a.device, a.bin, a.config)
            except RuntimeError as e:
                print(f"{name}: thunder failed: {e}", flush=True)
                failed = True
                break
            if "ort_ms" in row:
                rounds.append((stats["median_ms"], row["ort_ms"]))
        if failed:
            continue
        if len(rounds) > 1:
            ratios = sorted(t / o for t, o in rounds)
            row.update(rounds=[dict(thunder_ms=t, ort_ms=o) for t, o in rounds],
                       round_ratio_median=statistics.median(ratios))
            print(f"{name:16s} rounds (thunder / ORT ms): "
                  + ", ".join(f"{t:.2f}/{o:.2f} ({t / o:.2f}x)" for t, o in rounds)
                  + f"; median ratio {statistics.median(ratios):.2f}x", flush=True)
        err = float(np.abs(t_out - ref).max() / max(np.abs(ref).max(), 1e-30))
        row.update(thunder_ms=stats["median_ms"], thunder_min_ms=stats["min_ms"],
                   thunder_first_ms=stats["first_call_ms"], translate_ms=stats["translate_ms"],
                   compile_ms=stats["compile_ms"], load_ms=stats["load_ms"], rel_err=err,
                   thunder_cpu_ms=stats.get("cpu_ms"),
                   err_against="ort" if "ort_ms" in row else "torch eager")
        rows.append(row)
        line = f"{name:16s} thunder {stats['median_ms']:9.2f} ms (min {stats['min_ms']:.2f})"
        if "ort_ms" in row:
            row.update(ratio=stats["median_ms"] / o_med, min_ratio=stats["min_ms"] / o_min)
            line += f"  ORT {o_med:9.2f} ms  ratio {row['ratio']:5.2f}x (min ratio {row['min_ratio']:.2f}x)"
        if cuda:
            row.update(torch_ratio=stats["median_ms"] / e_med)
            line += f"  torch eager {e_med:.2f} ms: {row['torch_ratio']:.2f}x"
        if row.get("ort_cpu_ms") and row.get("thunder_cpu_ms"):
            # CPU time per call (all threads): steadier than latency on a shared machine, but
            # with more than one thread ORT's pool spins while idle, so compare it at
            # --threads 1 (thunder's rayon workers sleep sooner).
            row.update(cpu_ratio=row["thunder_cpu_ms"] / row["ort_cpu_ms"])
            line += f"  cpu ms {row['thunder_cpu_ms']:.1f} vs {row['ort_cpu_ms']:.1f} ({row['cpu_ratio']:.2f}x)"
        line += (f"  first call: thunder {stats['first_call_ms']:.1f} ms (load {stats['load_ms']:.0f}, "
                 f"translate {stats['translate_ms']:.0f}, compile {stats['compile_ms']:.0f})  "
                 f"rel err {err:.1e} against {row['err_against']}")
        print(line, flush=True)
    with open(os.path.join(a.work, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
