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


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("bias", [True, False])
def test_multihead_attention_as_torch(batch_first, need_weights, average, bias):
    torch.manual_seed(3)
    m = torch.nn.MultiheadAttention(16, 4, bias=bias, batch_first=batch_first).eval()
    x = torch.randn(2, 5, 16) if batch_first else torch.randn(5, 2, 16)
    y = torch.randn(2, 7, 16) if batch_first else torch.randn(7, 2, 16)

    def f(a, b):
        out, w = m(a, b, b, need_weights=need_weights, average_attn_weights=average)
        return (out, w) if need_weights else out

    with torch.no_grad():
        got, want = thunder_rs.jit(f)(x, y), f(x, y)
    for g, w in zip(got if need_weights else [got], want if need_weights else [want]):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
def test_multihead_attention_with_a_2d_mask_and_unbatched(mask_dtype):
    torch.manual_seed(4)
    m = torch.nn.MultiheadAttention(8, 2).eval()
    causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    mask = causal if mask_dtype == torch.bool else torch.zeros(6, 6).masked_fill(causal, float("-inf"))
    x = torch.randn(6, 8)
    f = lambda a: m(a, a, a, need_weights=False, attn_mask=mask)[0]  # noqa: E731
    with torch.no_grad():
        torch.testing.assert_close(thunder_rs.jit(f)(x), f(x), rtol=1e-5, atol=1e-5)


def test_multihead_attention_with_a_key_padding_mask_is_refused_by_name():
    m = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 3, 8)
    pad = torch.tensor([[False, False, True], [False, False, False]])
    with pytest.raises(thunder_rs.UnsupportedOpError, match="key_padding_mask"):
        with torch.no_grad():
            thunder_rs.jit(lambda a: m(a, a, a, key_padding_mask=pad, need_weights=False)[0])(x)
