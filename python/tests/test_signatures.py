"""The torch -> ltorch mapping reads the op table's signatures: torch callables named like an
ltorch op need no Python row, keywords and defaults come from the table, and calls that do
not fit get the binder's words."""

import pytest
import torch
import torch.nn.functional as F

import thunder_rs
from thunder_rs import _mapping as M
from thunder_rs import _native
from thunder_rs._signatures import SIGNATURES, torch_callables


def test_signatures_come_from_the_op_table():
    sigs = _native.signatures()
    assert set(sigs) == set(_native.ltorch_symbols())
    p = {q["name"]: q for q in sigs["ltorch.var_mean"]}
    assert p["correction"]["keyword_only"] and p["correction"]["default"] == ("i", 1)
    assert "default" not in p["input"]
    bound = _native.bind("ltorch.softmax", [("v", 0)], [("dim", ("i", -1))])
    assert bound == [("v", 0), ("i", -1)]
    with pytest.raises(TypeError, match="missing required argument `dim`"):
        _native.bind("ltorch.softmax", [("v", 0)], [])


def test_every_torch_callable_named_like_an_ltorch_op_is_mapped():
    missing = []
    for op in SIGNATURES:
        for f, name in torch_callables(op.rsplit(".", 1)[-1]):
            if f not in M.TABLE and f not in M.INPLACE and f not in M.NOT_BY_NAME:
                missing.append(name)
    assert not missing, missing
    # rows written by hand are the exception
    assert len(M.AUTO) > 200


CASES = [
    ("cumsum with dtype=", lambda x: torch.cumsum(x, dim=1, dtype=torch.float64)),
    ("sum dtype and keepdim", lambda x: x.sum((0, 1), keepdim=True, dtype=torch.float64)),
    ("amax over a tuple", lambda x: x.amax(dim=(0, 2))),
    ("var_mean correction", lambda x: torch.var_mean(x, dim=1, correction=0)),
    ("std default", lambda x: torch.std(x, 2)),
    ("topk", lambda x: torch.topk(x, 2, dim=-1, largest=False)),
    ("sort stable", lambda x: torch.sort(x, dim=0, descending=True, stable=True)),
    ("max with dim", lambda x: torch.max(x, 1, keepdim=True)),
    ("max of two tensors", lambda x: torch.max(x, x.flip(0))),
    ("add alpha", lambda x: torch.add(x, x * 2, alpha=-0.5)),
    ("sub alpha method", lambda x: x.sub(1.5, alpha=2)),
    ("hypot", lambda x: torch.hypot(x, x + 1)),
    ("softmax dtype", lambda x: F.softmax(x, dim=-1, dtype=torch.float64)),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 2, stride=1)),
    ("rms_norm", lambda x: F.rms_norm(x, [4], eps=1e-5)),
    ("unflatten", lambda x: x.unflatten(2, (2, 2))),
    ("where method", lambda x: x.where(x > 0, -x)),
    ("split sizes", lambda x: torch.split(x, [1, 2], dim=1)),
    ("split method", lambda x: x.split(1, dim=0)),
    ("clamp tensor bounds", lambda x: x.clamp(min=x.mean(0), max=x.amax(0) * 0.5)),
    ("in-place auto (exp_)", lambda x: x.clone().exp_()),
    ("relu inplace=True", lambda x: F.relu(x * 1, inplace=True)),
    ("cat keyword", lambda x: torch.cat(tensors=[x, x], dim=0)),
    ("torch.tensor scalar", lambda x: x * torch.tensor(2.0)),
]


@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_generic_rows_match_torch(name, f):
    x = torch.randn(2, 3, 4)
    want = f(x.clone())
    got = thunder_rs.jit(f)(x.clone())
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("f,words", [
    (lambda x: torch.div(x, 2, rounding_mode="floor"), "rounding_mode='floor'"),
    (lambda x: F.mse_loss(x, x, reduction="sum"), "reduction='sum'"),
    (lambda x: torch.std(x, 1, True), "takes 2 positional arguments but 3 were given"),
    (lambda x: torch.norm(x, p="fro"), "argument `p` must be"),
])
def test_calls_that_do_not_fit_name_the_parameter(f, words):
    with pytest.raises(thunder_rs.UnsupportedOpError) as e:
        thunder_rs.jit(f)(torch.randn(3, 4))
    assert words in str(e.value)
    assert "test_signatures.py" in str(e.value)


def test_batch_norm_training_writes_running_statistics_back():
    bn = torch.nn.BatchNorm2d(3)
    ref = torch.nn.BatchNorm2d(3)
    ref.load_state_dict(bn.state_dict())
    x = torch.randn(4, 3, 5, 5)
    jm = thunder_rs.jit(bn)
    torch.testing.assert_close(jm(x), ref(x))
    torch.testing.assert_close(bn.running_mean, ref.running_mean)
    torch.testing.assert_close(bn.running_var, ref.running_var)
    bn.eval(), ref.eval()
    torch.testing.assert_close(jm(x), ref(x))
