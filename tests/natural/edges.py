# A 0-d input `s` and an empty one `e` (0 rows), with keyword arguments and defaults.
def computation(s, e, x):
  a = ltorch.mul(s, other=2.0)
  b = ltorch.add(x, other=s)
  c = ltorch.sum(e, dim=0)
  d = ltorch.sum(e)
  f = ltorch.cat([e, e], dim=0)
  g = ltorch.exp(input=e)
  h = ltorch.softmax(e, dim=-1)
  i = ltorch.amax(x, dim=(0, 1))
  return a, b, c, d, f, g, h, i
