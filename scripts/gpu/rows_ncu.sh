#!/usr/bin/env bash
# Nsight Compute's view of thunder's row kernels (rows_kernels.py's cases, --only picks them):
# duration, DRAM throughput, achieved occupancy, registers, the main stall reasons, issue-slot
# and MUFU-pipe use, warp instructions and local-memory (spill) bytes, per kernel, clocks left
# alone. On the device, carry [".gpu-bin"]:
#   bash scripts/gpu/rows_ncu.sh .gpu-bin layer_norm softmax
set -uo pipefail
bin="$(cd "${1:-.gpu-bin}" && pwd)"
shift || true
here="$(dirname "$0")"
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
metrics+=,launch__occupancy_limit_registers,launch__block_size,launch__grid_size
metrics+=,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
# Bound by instructions? issue slots busy, the MUFU (exp) pipe's share, warp instructions.
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
# Register spills: bytes loaded from and stored to local memory (0 where nothing spills).
metrics+=,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum
ncu --clock-control none -k regex:thunder_ --metrics "$metrics" --csv --print-units base \
  bash "$here/rows_kernels.sh" "$bin" --no-profiler --reps 1 --only "$@" 2>/dev/null \
  | python3 "$here/ncu_table.py"
