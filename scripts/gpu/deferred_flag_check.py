#!/usr/bin/env python3
"""cuda-kernels' device error flags (issue 17): the first run of an op reports a bad index at
once; later runs do not wait, and the op's next run reports it, naming the op; with
THUNDER_CUDA_SYNC_CHECKS=1 every run reports its own. Exits 1 on any mismatch.

    THUNDER_CONFIG=plugins-gpu.toml python3 scripts/gpu/deferred_flag_check.py
"""

import os
import subprocess
import sys

import torch
import torch.nn.functional as F


def lookup(idx, w):
    return F.embedding(idx, w) * 2.0


def calls(sync):
    import thunder_rs

    dev = "cuda:0"
    w = torch.randn(100, 8, device=dev)
    good = torch.tensor([[1, 2, 3]], device=dev)
    bad = torch.tensor([[1, 200, 3]], device=dev)
    jf = thunder_rs.jit(lookup)
    seen = []
    for name, idx in [("good", good), ("good", good), ("bad", bad), ("good", good), ("good", good)]:
        try:
            out = jf(idx, w)
            torch.cuda.synchronize()
            ok = name != "good" or torch.equal(out, lookup(idx, w))
            seen.append(("ok" if ok else "wrong", ""))
        except Exception as e:  # noqa: BLE001 - the error text is what is checked
            seen.append(("error", str(e)))
    return seen


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        for kind, msg in calls(sync=os.environ.get("THUNDER_CUDA_SYNC_CHECKS") == "1"):
            print(f"CALL {kind} {msg[:300]!r}")
        return 0
    failures = 0
    for sync, want in [
        ("0", ["ok", "ok", "ok", "error", "ok"]),  # deferred: the run after the bad one reports
        ("1", ["ok", "ok", "error", "ok", "ok"]),  # sync checks: the bad run reports
    ]:
        env = dict(os.environ, THUNDER_CUDA_SYNC_CHECKS=sync)
        p = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True)
        got = [l.split(" ", 2) for l in p.stdout.splitlines() if l.startswith("CALL ")]
        kinds = [g[1] for g in got]
        print(f"THUNDER_CUDA_SYNC_CHECKS={sync}: {kinds} (want {want})")
        for g in got:
            if g[1] == "error":
                print(f"  error text: {g[2]}")
        errors = [g[2] for g in got if g[1] == "error"]
        named = all("out of bounds" in e and "200" in e for e in errors)
        late = all(("earlier run" in e) == (sync == "0") for e in errors)
        if kinds != want or not named or not late:
            failures += 1
            print(f"  MISMATCH (rc {p.returncode}): {p.stderr[-1500:]}")
    print("deferred_flag_check:", "PASS" if failures == 0 else f"FAIL ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
