# A two-layer MLP with torch's spelling: keyword arguments, torch's defaults, no annotations.
def computation(x, w1, b1, w2, b2):
  h = ltorch.linear(x, weight=w1, bias=b1)
  a = ltorch.gelu(h, approximate='tanh')
  n = ltorch.layer_norm(a, normalized_shape=[8], eps=1e-05)
  o = ltorch.linear(input=n, weight=w2)
  s = ltorch.softmax(o, dim=-1)
  l = ltorch.log_softmax(o, dim=1)
  r = ltorch.relu(input=o)
  g = ltorch.gelu(input=o)
  return (s, l, r, g)
