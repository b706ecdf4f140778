# Integer and bool ops: i and j are i64, s holds small shifts.
def computation(i, j, s):
  t0 = ltorch.bitwise_and(i, other=j)
  t1 = ltorch.bitwise_or(i, other=j)
  t2 = ltorch.bitwise_xor(input=i, other=j)
  t3 = ltorch.bitwise_not(input=i)
  t4 = ltorch.bitwise_left_shift(i, other=s)
  t5 = ltorch.bitwise_right_shift(i, other=s)
  t6 = ltorch.to(i, dtype=dtypes.f32)
  t7 = ltorch.cumsum(i, dim=0)
  t8 = ltorch.sum(i)
  return (t0, t1, t2, t3, t4, t5, t6, t7, t8)
