# The `tanh4_16m` workload of `thunder bench` as a program (issue 20), for profiling it alone:
#   thunder bench benches/programs/tanh4.py -i x=randn:f32[16777216]
def computation(x):
  a = ltorch.tanh(ltorch.add(ltorch.mul(x, 1.01), 0.1))
  b = ltorch.tanh(ltorch.add(ltorch.mul(a, 1.01), 0.1))
  c = ltorch.tanh(ltorch.add(ltorch.mul(b, 1.01), 0.1))
  d = ltorch.tanh(ltorch.add(ltorch.mul(c, 1.01), 0.1))
  return d
