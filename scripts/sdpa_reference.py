"""torch references for ltorch.sdpa_fwd_lse and ltorch.sdpa_bwd, shared by the fixture scripts
(gen_op_fixtures.py, gen_opinfo_fixtures.py, gen_natural_fixtures.py)."""

import torch
import torch.nn.functional as F


def scores64(q, k, causal, scale):
    """The scaled, causally masked scores in f64, and the scale used (torch's default 1/sqrt(E)).
    f16/bf16 scores are rounded as torch's attention rounds them (matmul, then scale)."""
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    if q.dtype in (torch.float16, torch.bfloat16):
        s = ((q @ k.transpose(-2, -1)) * scale).double()
    else:
        s = (q.double() @ k.double().transpose(-2, -1)) * scale
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return s, scale


def fwd_lse(q, k, v, causal, scale):
    """torch's attention and the log-sum-exp of its scores (f64, stored f32; f64 for f64)."""
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    return out, torch.logsumexp(scores64(q, k, causal, scale)[0], -1).to(acc)


def bwd_formula(g, q, k, v, out, lse, causal, scale):
    """The flash backward's formula in f64, from the given out and lse, in q/k/v's dtypes."""
    s, scale = scores64(q, k, causal, scale)
    p = torch.exp(s - lse.double().unsqueeze(-1))
    g64 = g.double()
    dv = p.transpose(-2, -1) @ g64
    d = (g64 * out.double()).sum(-1, keepdim=True)
    ds = p * (g64 @ v.double().transpose(-2, -1) - d)
    dq = scale * ds @ k.double()
    dk = scale * ds.transpose(-2, -1) @ q.double()
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
