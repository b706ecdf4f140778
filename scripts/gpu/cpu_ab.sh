#!/bin/bash
# On the device: A/B of an env switch on 2 pinned cores. usage: dev_ab.sh BIN VAR "vals" ROUNDS WORKLOADS
BIN=$1; VAR=$2; VALS=$3; R=$4; W=$5
printf 'plugin_dirs = ["%s"]\n' "$PWD/$BIN" > /tmp/cpu.toml
export THUNDER_CONFIG=/tmp/cpu.toml THUNDER_EXECUTORS=cpu-simd,interpreter RAYON_NUM_THREADS=2
for r in $(seq $R); do for v in $VALS; do
  env $VAR=$v taskset -c 2,3 $BIN/thunder bench --min-time 0.5 --only $W 2>&1 | grep -E "^[a-z0-9_]+ +[0-9.]+ (ms|us|GFLOP)" | awk -v v=$v '{print v, $1, $2}'
done; done > $OUT/raw.txt
python3 - <<PY
import collections, statistics
d=collections.defaultdict(list)
for l in open('$OUT/raw.txt'):
    v,w,x=l.split(); d[(w,v)].append(float(x))
for (w,v),xs in sorted(d.items()):
    print(f"{w:16s} {v:8s} median {statistics.median(xs):9.3f}  all {' '.join(f'{x:.3f}' for x in xs)}")
PY
for v in $VALS; do
  env $VAR=$v THUNDER_CPU_SIMD_TRACE=1 taskset -c 2,3 $BIN/thunder bench --min-time 0.5 --only gpt2_block 2>&1 | grep "cpu-simd gemm" | awk -v v=$v '{k=$0; sub(/.*batch \[\] /,"",k); t[k]+=$3; n[k]++; tot+=$3; c++} END {for (k in t) printf "%s=%s %8.1f us %s\n", "v", v, t[k]/n[k], k; printf "v=%s gemm total per block %.1f\n", v, tot/c*12}' | sort -k4
done
