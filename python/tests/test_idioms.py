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


@pytest.mark.parametrize(
    "eq,shapes",
    [
        ("bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)]),
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("...ij->...ji", [(2, 3, 4)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
        ("i,i->", [(5,), (5,)]),
    ],
)
def test_einsum_as_torch(eq, shapes):
    ops = [torch.randn(*s) for s in shapes]
    f = thunder_rs.jit(lambda *xs: torch.einsum(eq, *xs))
    torch.testing.assert_close(f(*ops), torch.einsum(eq, *ops), rtol=1e-5, atol=1e-5)


def test_einsum_operands_in_a_list_and_its_gradient():
    a = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(4, 2, requires_grad=True)
    f = thunder_rs.jit(lambda x, y: torch.einsum("ij,jk->ik", [x, y]).tanh().sum())
    f(a, b).backward()
    ga, gb = a.grad.clone(), b.grad.clone()
    a.grad = b.grad = None
    torch.einsum("ij,jk->ik", [a, b]).tanh().sum().backward()
    torch.testing.assert_close(ga, a.grad)
    torch.testing.assert_close(gb, b.grad)


def test_an_einsum_diagonal_is_refused_by_name():
    with pytest.raises(Exception, match="a label repeated within operand"):
        thunder_rs.jit(lambda x: torch.einsum("ii->i", x))(torch.randn(3, 3))
