# Calls written inside other calls' arguments and in `return`, as Python reads them: the parser
# runs the inner calls first, into temporaries.
def computation(x, w, b):
  y = ltorch.softmax(ltorch.matmul(x, ltorch.transpose(w, 0, 1)), dim=-1)
  z = ltorch.add(ltorch.mul(y, 2.0), ltorch.unsqueeze(b, 0))
  return ltorch.sum(ltorch.relu(z), dim=1, keepdim=True), ltorch.exp(input=x)
