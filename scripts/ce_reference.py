"""torch references for ltorch.cross_entropy_lse and ltorch.cross_entropy_bwd, shared by the
fixture scripts (gen_opinfo_fixtures.py, gen_natural_fixtures.py)."""

import torch
import torch.nn.functional as F


def ce_lse(x, t, ii):
    """cross_entropy_lse: torch's mean cross-entropy over the kept rows (computed in f64, rounded
    once to the logits' dtype; NaN when every row is ignored) and the row log-sum-exp in f32
    (f64 for f64 logits)."""
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    loss = F.cross_entropy(x.double(), t.long(), ignore_index=ii)
    return loss.to(x.dtype), torch.logsumexp(x.double(), 1).to(acc)


def ce_bwd(g, x, t, lse, ii):
    """cross_entropy_bwd: (exp(x - lse) - onehot) * g / count on the kept rows, 0 on ignored
    rows, in f64, rounded once to the logits' dtype."""
    t = t.long()
    kept = t != ii
    p = torch.exp(x.double() - lse.double()[:, None])
    onehot = torch.zeros_like(p)
    rows = kept.nonzero().flatten()
    onehot[rows, t[rows]] = 1.0
    count = kept.sum().double()
    scale = torch.where(kept, g.double() / count, torch.zeros((), dtype=torch.float64))
    return ((p - onehot) * scale[:, None]).to(x.dtype)
