def computation(x):
  t0, t1 = ltorch.topk(x, k=2)
  t2, t3 = ltorch.topk(x, 3, dim=0, largest=False)
  t4, t5 = ltorch.sort(input=x)
  t6, t7 = ltorch.sort(x, dim=0, descending=True, stable=True)
  return (t0, t1, t2, t3, t4, t5, t6, t7)
