"""Advanced indexing, boolean-mask and stepped-slice assignment, index_put_ without
accumulate: each against the same code run by plain PyTorch, forward and (where
differentiable) backward."""

import pytest
import torch

import thunder_rs


def check(f, *args, grad=False):
    """Runs ``f`` on clones under PyTorch and thunder_rs; compares results and the inputs
    afterwards (in-place writes), and with ``grad`` the gradients of the float inputs."""
    ref = [a.clone().requires_grad_(grad and a.is_floating_point()) if isinstance(a, torch.Tensor) else a for a in args]
    got = [a.clone().requires_grad_(grad and a.is_floating_point()) if isinstance(a, torch.Tensor) else a for a in args]
    want = f(*ref)
    out = thunder_rs.jit(f)(*got)
    torch.testing.assert_close(out, want)
    if grad:
        want.sum().backward()
        out.sum().backward()
        for a, b in zip(ref, got):
            if isinstance(a, torch.Tensor) and a.requires_grad:
                torch.testing.assert_close(b.grad, a.grad)
    else:
        for a, b in zip(ref, got):
            if isinstance(a, torch.Tensor):
                torch.testing.assert_close(b, a)


IDX = torch.tensor([2, 0, -1, 2])


@pytest.mark.parametrize("name,f", [
    ("1-D index", lambda x, i: x[i]),
    ("index on dim 1", lambda x, i: x[:, i]),
    ("2-D index tensor", lambda x, i: x[i.reshape(2, 2)]),
    ("two adjacent indices", lambda x, i: x[i, i.flip(0)]),
    ("int and index, adjacent", lambda x, i: x[1, i]),
    ("separated indices go first", lambda x, i: x[i, :, i.flip(0)]),
    ("int separated from index", lambda x, i: x[0, :, i]),
    ("slice then index", lambda x, i: x[1:, i]),
    ("None and ellipsis", lambda x, i: x[None, ..., i]),
    ("int32 index", lambda x, i: x[i.to(torch.int32)]),
])
def test_advanced_getitem_matches_torch_with_grad(name, f):
    x = torch.randn(3, 3, 3, dtype=torch.float64)
    check(f, x, IDX, grad=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bool])
def test_advanced_getitem_dtypes_and_empty(dtype):
    x = (torch.arange(12) % 5).to(dtype).reshape(4, 3)
    check(lambda x, i: x[i], x, torch.tensor([3, 1]))
    check(lambda x, i: x[i], x, torch.tensor([], dtype=torch.int64))
    check(lambda x, i: x[:, i], torch.empty(0, 3, dtype=dtype), torch.tensor([0, 2]))


def test_setitem_with_index_tensor_last_write_wins():
    def f(x, i, v):
        x[i] = v
        return x * 1

    x = torch.randn(5, 3)
    check(f, x, torch.tensor([4, 0, 2]), torch.randn(3, 3))
    # repeated index: torch's CPU loop keeps the last write; so do we
    check(f, x, torch.tensor([1, 3, 1, 1]), torch.randn(4, 3))
    check(f, x, torch.tensor([1, -1]), 7.0)
    check(lambda x, i, v: x.index_put_((i, i.flip(0)), v), torch.randn(4, 4), torch.tensor([0, 3, 3]), torch.randn(3))


def test_setitem_index_tensor_on_a_later_dim_and_grad():
    def f(x, i, v):
        y = x * 2
        y[:, i] = v
        return y

    check(f, torch.randn(3, 4, dtype=torch.float64), torch.tensor([3, 0]),
          torch.randn(3, 2, dtype=torch.float64), grad=True)


def test_index_put_accumulate_with_several_indices():
    def f(x, i, j, v):
        return x.index_put((i, j), v, accumulate=True)

    check(f, torch.randn(4, 5), torch.tensor([0, 3, 3, 0]), torch.tensor([1, 4, 4, -1]), torch.randn(4))


def test_boolean_mask_assignment():
    def f(x, m):
        x[m] = 0.5
        return x + 0

    x = torch.randn(4, 5)
    check(f, x, x > 0)
    check(lambda x, m: x.masked_fill(m, 1), x, x < 0)

    def g(x, m, v):  # mask over the leading dim, one row value broadcast
        x[m] = v
        return x

    check(g, x, torch.tensor([True, False, True, False]), torch.randn(5))
    check(lambda x, m: x.index_put_((m,), torch.tensor(3.0)), x, x > 1)


@pytest.mark.parametrize("idx", [
    (slice(None, None, 2),),
    (slice(1, None, 3),),
    (slice(None), slice(0, 5, 2)),
    (slice(1, 4, 2), slice(None, None, 3)),
    (1, slice(None, None, 2)),
])
def test_stepped_slice_assignment(idx):
    def f(x, v):
        x[idx] = v
        return x

    x = torch.randn(5, 6, dtype=torch.float64)
    shape = x[idx].shape
    check(f, x, torch.randn(shape, dtype=torch.float64))
    check(f, x, 2.0)

    def g(x, v):
        y = x * 1
        y[idx] = v
        return y

    check(g, x, torch.randn(shape, dtype=torch.float64), grad=True)


def test_refused_indexing_is_one_clear_error():
    with pytest.raises(thunder_rs.UnsupportedOpError, match="data-dependent shape"):
        thunder_rs.jit(lambda x: x[x > 0])(torch.randn(4))

    def f(x, i):
        x[1:3, i] = 1.0
        return x

    with pytest.raises(thunder_rs.UnsupportedOpError, match="partial slices"):
        thunder_rs.jit(f)(torch.randn(4, 4), torch.tensor([0]))

    def g(x, m, v):
        x[m] = v
        return x

    with pytest.raises(thunder_rs.UnsupportedOpError, match="one value per masked element"):
        thunder_rs.jit(g)(torch.randn(4), torch.tensor([True, False, True, False]), torch.randn(2))
