"""The meta outputs tracing makes itself (``_fast_meta``) are torch's, the cases it does not
take fall back to torch (whose errors reach the user), and jitted functions through them give
eager's values."""

import pytest
import torch
import torch.nn.functional as F

import thunder_rs
from thunder_rs import _fast_meta


def meta(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


TAKEN = [
    (F.linear, (meta(2, 3, 4), meta(5, 4), meta(5)), {}),
    (F.linear, (meta(4), meta(5, 4)), {"bias": None}),
    (F.linear, (meta(7, 4, dtype=torch.bfloat16), meta(5, 4, dtype=torch.bfloat16)), {}),
    (F.layer_norm, (meta(2, 3, 8), [8], meta(8), meta(8)), {"eps": 1e-6}),
    (F.layer_norm, (meta(2, 3, 8), (3, 8)), {}),
    (F.scaled_dot_product_attention, (meta(2, 4, 16, 8), meta(2, 4, 12, 8), meta(2, 4, 12, 6)), {"is_causal": False}),
    (F.scaled_dot_product_attention, (meta(3, 16, 8), meta(3, 16, 8), meta(3, 16, 8)), {"is_causal": True, "scale": 0.5}),
    (F.gelu, (meta(2, 5),), {"approximate": "tanh"}),
    (F.gelu, (meta(0, 5, dtype=torch.float16),), {}),
    (torch.Tensor.__add__, (meta(2, 3), meta(2, 3)), {}),
    (torch.mul, (meta(), meta()), {}),
    (torch.Tensor.sub, (meta(0,), meta(0,)), {}),
]


@pytest.mark.parametrize("func,args,kwargs", TAKEN)
def test_a_taken_call_has_torchs_output_shape_and_dtype(func, args, kwargs):
    fast = _fast_meta.output(func, args, kwargs)
    assert fast is not None
    want = func(*args, **kwargs)
    assert fast.is_meta and fast.shape == want.shape and fast.dtype == want.dtype


LEFT = [
    # mixed dtypes, a mask, broadcast heads, broadcasting and promotion, integer tensors
    (F.linear, (meta(2, 4), meta(5, 4, dtype=torch.float64)), {}),
    (F.linear, (meta(2, 4), meta(5, 3)), {}),
    (F.linear, (meta(2, 4), meta(5, 4), meta(4)), {}),
    (F.layer_norm, (meta(2, 8), [4]), {}),
    (F.layer_norm, (meta(2, 8), [8], meta(4)), {}),
    (F.scaled_dot_product_attention, (meta(2, 4, 16, 8), meta(2, 4, 16, 8), meta(2, 4, 16, 8)), {"attn_mask": meta(16, 16)}),
    (F.scaled_dot_product_attention, (meta(2, 4, 16, 8), meta(2, 1, 16, 8), meta(2, 1, 16, 8)), {}),
    (F.gelu, (meta(2, 3),), {"approximate": "fast"}),
    (torch.Tensor.__add__, (meta(2, 3), meta(3)), {}),
    (torch.add, (meta(2, 3), meta(2, 3)), {"alpha": 2}),
    (torch.mul, (meta(2, 3), meta(2, 3, dtype=torch.float16)), {}),
    (torch.mul, (meta(2, 3, dtype=torch.int32), meta(2, 3, dtype=torch.int32)), {}),
    (torch.mul, (meta(2, 3), 2.0), {}),
]


@pytest.mark.parametrize("func,args,kwargs", LEFT)
def test_other_calls_are_left_to_torch(func, args, kwargs):
    assert _fast_meta.output(func, args, kwargs) is None


def test_a_call_torch_refuses_is_still_refused_by_torch():
    f = thunder_rs.jit(lambda x, w: F.linear(x, w))
    with pytest.raises(RuntimeError, match="same reduction dim"):
        f(torch.randn(2, 4), torch.randn(5, 3))


def test_a_block_through_the_fast_outputs_gives_eagers_values():
    torch.manual_seed(0)
    ln = torch.nn.LayerNorm(16)
    fc = torch.nn.Linear(16, 48)

    def block(x):
        q, k, v = fc(ln(x)).split(16, dim=2)
        heads = [t.view(2, 5, 4, 4).transpose(1, 2) for t in (q, k, v)]
        y = F.scaled_dot_product_attention(*heads, is_causal=True).transpose(1, 2).reshape(2, 5, 16)
        return F.gelu(y, approximate="tanh") * y + x - y

    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        torch.testing.assert_close(thunder_rs.jit(block)(x), block(x), rtol=1e-5, atol=1e-5)


def test_a_closure_over_modules_captures_their_weights():
    """Module weights met mid-trace (a closure, not the jitted module) become extra inputs,
    numbered after the ops recorded before them; the program still reads them as inputs."""
    torch.manual_seed(1)
    fc1, fc2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)

    def f(x):
        h = torch.tanh(x * 2.0)
        return fc2(torch.relu(fc1(h))) + h.sum()

    x = torch.randn(5, 4)
    with torch.no_grad():
        torch.testing.assert_close(thunder_rs.jit(f)(x), f(x), rtol=1e-5, atol=1e-5)
