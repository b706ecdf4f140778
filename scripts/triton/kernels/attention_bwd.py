"""Flash-attention forward with the row log-sum-exp, and its backward, for `ltorch.sdpa_fwd_lse`
and `ltorch.sdpa_bwd` (after the structure of Triton's fused-attention tutorial,
python/tutorials/06-fused-attention.py, without its host-side pre-scaling of k).

Layouts: contiguous q, out, grad_out, dq [B, H, L, D]; k, v, dk, dv [B, H, S, D]; lse and
delta [B, H, L] in f32. `lse[i] = log(sum_j exp(scale * q_i . k_j))` over the visible keys, in
natural log (the kernels work in base 2 inside, where exp2 is one instruction: m2 = lse*log2(e)).
CAUSAL is torch's top-left aligned mask: key j is visible to query i when j <= i, so every
query row sees at least key 0 and no row is empty.

Backward, three launches of two kernels:
1. `attn_bwd_preprocess`: delta = rowsum(dO * O) in f32 (one program per BLOCK query rows).
2. `attn_bwd`: program `pid` of (batch, head) `bh` computes dK, dV for keys
   [pid*BLOCK_N1, +BLOCK_N1) by walking the query blocks that see them, then dQ for queries
   [pid*BLOCK_M2, +BLOCK_M2) by walking the keys they see. Each output element is written by one
   program, so no atomics are needed. The grid covers max(S/BLOCK_N1, L/BLOCK_M2) programs per
   (batch, head) so L != S works; a program whose key (query) block is past S (L) skips that half.
   Blocks the causal diagonal crosses are walked in slices of BLOCK/BLK_SLICE_FACTOR with the mask;
   the rest without it.

P = exp2(scale*log2e * q.k - m2); dV = P^T dO; dP = dO V^T; dS = P * (dP - delta);
dQ = scale * dS K; dK = scale * dS^T Q.
"""

import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _fwd_inner(acc, l_i, m_i, q, K, V, kv_base, offs_m, offs_n, offs_d, lo, hi, qk_scale,
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
def attn_fwd_lse(Q, K, V, O, LSE, sm_scale, L, S,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CAUSAL: tl.constexpr):
    """As attention.attn_fwd, and also stores each row's natural-log log-sum-exp in LSE."""
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    q_base = bh * L * HEAD_DIM
    kv_base = bh * S * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:
        diag = tl.minimum(start_m * BLOCK_M, S)
        end = tl.minimum((start_m + 1) * BLOCK_M, S)
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, K, V, kv_base, offs_m, offs_n, offs_d,
                                   0, diag, qk_scale, HEAD_DIM, BLOCK_N, False)
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, K, V, kv_base, offs_m, offs_n, offs_d,
                                   diag, end, qk_scale, HEAD_DIM, BLOCK_N, True)
    else:
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, K, V, kv_base, offs_m, offs_n, offs_d,
                                   0, S, qk_scale, HEAD_DIM, BLOCK_N, False)
    acc = acc / l_i[:, None]
    tl.store(O + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(O.dtype.element_ty))
    # m_i is in base-2 units of the scaled scores: lse = (m_i + log2(l_i)) * ln(2).
    tl.store(LSE + bh * L + offs_m, (m_i + tl.math.log2(l_i)) * 0.6931471805599453)


@triton.jit
def attn_bwd_preprocess(O, DO, Delta, L, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    bh = tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, HEAD_DIM)
    ptrs = bh * L * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    o = tl.load(O + ptrs).to(tl.float32)
    do = tl.load(DO + ptrs).to(tl.float32)
    tl.store(Delta + bh * L + offs_m, tl.sum(o * do, axis=1))


@triton.jit
def _bwd_dkdv(dk, dv, Q, k, v, DO, M2, Delta, qk_scale, start_n, start_m, num_steps,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              MASK: tl.constexpr):
    """Adds the contributions of `num_steps` query blocks from `start_m` to the key block's dK, dV."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    curr_m = start_m
    for _ in range(num_steps):
        offs_m = curr_m + tl.arange(0, BLOCK_M)
        qT = tl.load(Q + offs_m[None, :] * HEAD_DIM + offs_d[:, None])
        m2 = tl.load(M2 + offs_m) * 1.4426950408889634
        qkT = tl.dot(k, qT) * qk_scale
        pT = tl.math.exp2(qkT - m2[None, :])
        if MASK:
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        do = tl.load(DO + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
        dv += tl.dot(pT.to(do.dtype), do)
        di = tl.load(Delta + offs_m)
        dpT = tl.dot(v, tl.trans(do)).to(tl.float32)
        dsT = pT * (dpT - di[None, :])
        dk += tl.dot(dsT.to(qT.dtype), tl.trans(qT))
        curr_m += BLOCK_M
    return dk, dv


@triton.jit
def _bwd_dq(dq, q, K, V, do, m2, di, qk_scale, start_m, start_n, num_steps,
            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            MASK: tl.constexpr):
    """Adds the contributions of `num_steps` key blocks from `start_n` to the query block's dQ."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    curr_n = start_n
    for _ in range(num_steps):
        offs_n = curr_n + tl.arange(0, BLOCK_N)
        kT = tl.load(K + offs_n[None, :] * HEAD_DIM + offs_d[:, None])
        vT = tl.load(V + offs_n[None, :] * HEAD_DIM + offs_d[:, None])
        qk = tl.dot(q, kT) * qk_scale
        p = tl.math.exp2(qk - m2[:, None])
        if MASK:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        dp = tl.dot(do, vT).to(tl.float32)
        ds = p * (dp - di[:, None])
        dq += tl.dot(ds.to(kT.dtype), tl.trans(kT))
        curr_n += BLOCK_N
    return dq


@triton.jit
def attn_bwd(Q, K, V, DO, M, Delta, DQ, DK, DV, sm_scale, L, S,
             HEAD_DIM: tl.constexpr, BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr,
             BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr, BLK_SLICE_FACTOR: tl.constexpr,
             CAUSAL: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    q_base = bh * L * HEAD_DIM
    kv_base = bh * S * HEAD_DIM
    Q += q_base
    DO += q_base
    DQ += q_base
    K += kv_base
    V += kv_base
    DK += kv_base
    DV += kv_base
    M += bh * L
    Delta += bh * L
    offs_d = tl.arange(0, HEAD_DIM)
    qk_scale = sm_scale * 1.4426950408889634

    # dK, dV for keys [start_n, start_n + BLOCK_N1).
    start_n = pid * BLOCK_N1
    if start_n < S:
        offs_n = start_n + tl.arange(0, BLOCK_N1)
        k = tl.load(K + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
        v = tl.load(V + offs_n[:, None] * HEAD_DIM + offs_d[None, :])
        dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
        start_m = 0
        if CAUSAL:
            # Queries before start_n see none of these keys; the diagonal block [start_n,
            # start_n + BLOCK_N1) is masked (empty when start_n >= L: nothing sees these keys).
            MASK_BLOCK_M1: tl.constexpr = BLOCK_M1 // BLK_SLICE_FACTOR
            start_m = start_n
            num_steps = tl.maximum(tl.minimum(BLOCK_N1, L - start_n), 0) // MASK_BLOCK_M1
            dk, dv = _bwd_dkdv(dk, dv, Q, k, v, DO, M, Delta, qk_scale, start_n, start_m,
                               num_steps, HEAD_DIM, MASK_BLOCK_M1, BLOCK_N1, True)
            start_m += num_steps * MASK_BLOCK_M1
        num_steps = tl.maximum(L - start_m, 0) // BLOCK_M1
        dk, dv = _bwd_dkdv(dk, dv, Q, k, v, DO, M, Delta, qk_scale, start_n, start_m,
                           num_steps, HEAD_DIM, BLOCK_M1, BLOCK_N1, False)
        tl.store(DV + offs_n[:, None] * HEAD_DIM + offs_d[None, :], dv.to(DV.dtype.element_ty))
        dk *= sm_scale
        tl.store(DK + offs_n[:, None] * HEAD_DIM + offs_d[None, :], dk.to(DK.dtype.element_ty))

    # dQ for queries [start_m, start_m + BLOCK_M2).
    start_m = pid * BLOCK_M2
    if start_m < L:
        offs_m = start_m + tl.arange(0, BLOCK_M2)
        q = tl.load(Q + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
        do = tl.load(DO + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
        m2 = tl.load(M + offs_m) * 1.4426950408889634
        di = tl.load(Delta + offs_m)
        dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
        end_n = S
        if CAUSAL:
            # Keys after the block's last query are hidden; the diagonal block (clipped to S)
            # is masked, the keys before it are not.
            MASK_BLOCK_N2: tl.constexpr = BLOCK_N2 // BLK_SLICE_FACTOR
            diag = tl.minimum(start_m, S)
            end_n = tl.minimum(start_m + BLOCK_M2, S)
            num_steps = (end_n - diag) // MASK_BLOCK_N2
            dq = _bwd_dq(dq, q, K, V, do, m2, di, qk_scale, start_m, diag, num_steps,
                         HEAD_DIM, BLOCK_M2, MASK_BLOCK_N2, True)
            end_n = diag
        num_steps = end_n // BLOCK_N2
        dq = _bwd_dq(dq, q, K, V, do, m2, di, qk_scale, start_m, 0, num_steps,
                     HEAD_DIM, BLOCK_M2, BLOCK_N2, False)
        dq *= sm_scale
        tl.store(DQ + offs_m[:, None] * HEAD_DIM + offs_d[None, :], dq.to(DQ.dtype.element_ty))
