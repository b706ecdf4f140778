"""Fused RMSNorm for `ltorch.rms_norm` over the last dim, with a weight:
y = x / sqrt(mean(x^2) + eps) * w, computed in f32 and stored in x's dtype (as the
decomposition does). One program per row; the row is read in BLOCK chunks, so any N works.
"""

import triton
import triton.language as tl


@triton.jit
def rms_norm_fwd(X, W, Y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * N
    y_row = Y + row * N
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)
