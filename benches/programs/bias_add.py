# A bias add as the ONNX models' linear layers run it (issue 19): a [384] row broadcast over
# [1024, 384] f32. cpu-simd runs it as one chain (load x, add the row read in place, store).
#   thunder bench benches/programs/bias_add.py -i x=randn:f32[1024,384] -i b=randn:f32[384]
# THUNDER_CPU_SIMD_TRACE=1 prints the group's loop nest, its chain steps and its time.
def computation(x, b):
  y = ltorch.add(x, b)
  return y
