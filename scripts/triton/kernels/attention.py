"""Fused attention forward (flash-attention style) for `ltorch.scaled_dot_product_attention`.

One program computes BLOCK_M query rows of one (batch, head) against all keys, keeping the
running max and sum of the online softmax in registers, so the L x S score matrix never
reaches memory. Inputs are contiguous [B, H, L, D] (q, o) and [B, H, S, D] (k, v); the package
manifest only claims shapes where L % BLOCK_M == 0 and S % BLOCK_N == 0, so no bounds masks
are needed. CAUSAL is torch's top-left aligned mask (key j visible to query i when j <= i):
key blocks wholly below the diagonal run unmasked, and only the blocks the diagonal crosses
pay for the mask (as Triton's fused-attention tutorial does).
"""

import triton
import triton.language as tl


@triton.jit
def _attn_inner(acc, l_i, m_i, q, K, V, kv_base, offs_m, offs_n, offs_d, lo, hi, qk_scale,
                HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k = tl.load(K + kv_base + cols[None, :] * HEAD_DIM + offs_d[:, None])
        qk = tl.dot(q, k) * qk_scale
        if MASKED:
            qk = tl.where(cols[None, :] <= offs_m[:, None], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attn_fwd(Q, K, V, O, sm_scale, L, S,
             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    q_base = bh * L * HEAD_DIM
    kv_base = bh * S * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    # exp2 instead of exp: fold log2(e) into the scale once.
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:
        # Keys before this query block are visible to all its rows; the block's own span
        # (clipped to S) needs the mask.
        diag = tl.minimum(start_m * BLOCK_M, S)
        end = tl.minimum((start_m + 1) * BLOCK_M, S)
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K, V, kv_base, offs_m, offs_n, offs_d,
                                    0, diag, qk_scale, HEAD_DIM, BLOCK_N, False)
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K, V, kv_base, offs_m, offs_n, offs_d,
                                    diag, end, qk_scale, HEAD_DIM, BLOCK_N, True)
    else:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K, V, kv_base, offs_m, offs_n, offs_d,
                                    0, S, qk_scale, HEAD_DIM, BLOCK_N, False)
    acc = acc / l_i[:, None]
    tl.store(O + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(O.dtype.element_ty))
