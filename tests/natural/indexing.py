# Gathers and scatters; idx holds row indices in [0, 4), cols column indices in [0, 3).
def computation(x, idx, cols, src, emb):
  t0 = ltorch.index_select(x, dim=0, index=idx)
  t1 = ltorch.gather(x, dim=1, index=cols)
  t2 = ltorch.scatter_add(x, dim=1, index=cols, src=src)
  t3 = ltorch.index_add(x, dim=0, index=idx, source=t0)
  t4 = ltorch.index_add(x, 0, idx, t0, alpha=2.0)
  t5 = ltorch.embedding(idx, weight=emb)
  t6 = ltorch.embedding(input=idx, weight=emb, padding_idx=1)
  return (t0, t1, t2, t3, t4, t5, t6)
