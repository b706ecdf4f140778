import onnxruntime as ort, numpy as np, json, sys, collections, glob, os
model, inp, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.inter_op_num_threads = 1
so.enable_profiling = True; so.profile_file_prefix = "/tmp/r50/ortprof"
s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
x = np.load(inp); name = s.get_inputs()[0].name
for _ in range(reps): s.run(None, {name: x})
f = s.end_profiling()
ev = json.load(open(f))
by = collections.defaultdict(list)
for e in ev:
    if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"): continue
    a = e.get("args", {})
    shapes = a.get("input_type_shape", [])
    key = (a.get("op_name"), json.dumps([list(d.values())[0] for d in shapes][:2]))
    by[key].append(e["dur"])
tot = 0
rows = []
for k, v in by.items():
    per = sum(v[len(v)//reps:]) / (reps - 1) if reps > 1 else sum(v)
    tot += per; rows.append((per, k, len(v)//reps))
rows.sort(reverse=True)
for per, k, c in rows[:40]: print(f"{per/1000:8.2f} ms  x{c:3d}  {k[0]:20s} {k[1]}")
print("total ms", tot/1000)
