#!/usr/bin/env python3
"""Reads `ncu --csv --print-units base` output on stdin and prints one line per kernel launch
(ID, name, then each metric, named by its middle part or by NAMES). The application's own lines
(the cases in order) print first. Used by rows_ncu.sh."""
import csv
import sys

# Metrics whose middle parts alone would not tell them apart.
NAMES = {
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": "local ld B",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": "local st B",
}


def main():
    lines = sys.stdin.readlines()
    for line in lines:
        if line.strip() and not line.startswith('"') and not line.startswith("==PROF=="):
            print(line.rstrip())
    rows = list(csv.reader(line for line in lines if line.startswith('"')))
    if not rows:
        print("no ncu rows")
        return 1
    ix = {h: i for i, h in enumerate(rows[0])}
    kernels = {}
    for r in rows[1:]:
        key = (r[ix["ID"]], r[ix["Kernel Name"]][:36])
        kernels.setdefault(key, {})[r[ix["Metric Name"]]] = r[ix["Metric Value"]]
    metrics = sorted({m for v in kernels.values() for m in v})

    def short(m):
        if m in NAMES:
            return NAMES[m]
        parts = m.split("__")
        return (parts[1] if len(parts) > 1 else m).split(".")[0].replace("average_warps_issue_stalled_", "stall_")[:18]

    print(f"{'id':>4} {'kernel':36} " + " ".join(f"{short(m):>18}" for m in metrics))
    for (i, name), v in kernels.items():
        print(f"{i:>4} {name:36} " + " ".join(f"{v.get(m, ''):>18}" for m in metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
