"""Programs as people write them: rotary embeddings (``torch.outer``), a closure over modules,
against eager."""

import pytest
import torch

import thunder_rs


def rotary(a):
    t = torch.arange(a.shape[-2], dtype=torch.float32)
    inv = 1.0 / (10000 ** (torch.arange(0, a.shape[-1], 2).float() / a.shape[-1]))
    freqs = torch.outer(t, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    half = a.shape[-1] // 2
    rot = torch.cat((-a[..., half:], a[..., :half]), dim=-1)
    return a * emb.cos() + rot * emb.sin()


def test_rotary_embedding_with_outer():
    x = torch.randn(2, 4, 6, 8)
    torch.testing.assert_close(thunder_rs.jit(rotary)(x), rotary(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spelling", [torch.outer, torch.Tensor.outer, torch.ger])
@pytest.mark.parametrize("n,m", [(3, 4), (0, 2), (1, 1)])
def test_outer_in_each_spelling(spelling, n, m):
    u, v = torch.randn(n), torch.randn(m, dtype=torch.float64)
    torch.testing.assert_close(thunder_rs.jit(spelling)(u, v), spelling(u, v))


def test_outer_of_a_matrix_gets_torchs_error():
    with pytest.raises(RuntimeError, match="outer: Expected 1-D"):
        thunder_rs.jit(torch.outer)(torch.randn(2, 2), torch.randn(3))
