"""DLPack round trips, in-place ops, errors, examine, traces, plugins."""

import pytest
import torch

import thunder_rs

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3, 4), (2, 0, 5)])
def test_dlpack_round_trip(dtype, shape):
    from thunder_rs._jit import _from_dlpack, _to_dlpack

    x = (torch.arange(max(1, int(torch.tensor(shape).prod().item())), dtype=torch.int64) % 7).to(dtype)
    x = x[: int(torch.tensor(shape).prod().item())].reshape(shape)
    f = thunder_rs.jit(lambda a: a.flatten(0, -1) if a.dim() else a.reshape([1]))
    out = f(x)
    assert out.dtype == dtype and torch.equal(out, x.reshape(-1))
    del _to_dlpack, _from_dlpack


def test_inputs_are_zero_copy_and_outputs_own_their_memory():
    from thunder_rs import _native
    from thunder_rs._jit import _from_dlpack, _to_dlpack

    x = torch.randn(4, 4)
    prog = _native.Program([("x", [4, 4], "f32", "cpu", False)], [], [0])
    (cap,), _ = prog.forward([_to_dlpack(x)])
    y = _from_dlpack(cap)
    # The identity program returns its input: the same memory, no copy.
    assert y.data_ptr() == x.data_ptr()
    del prog
    z = thunder_rs.jit(lambda a: a + 1)(x)
    del x
    assert torch.isfinite(z).all()


def test_non_contiguous_and_broadcast_inputs():
    a = torch.randn(4, 3).t()  # non-contiguous
    b = torch.randn(3, 1)
    f = thunder_rs.jit(lambda a, b: a * b - 1)
    torch.testing.assert_close(f(a, b), a * b - 1)


@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3)])
def test_scalar_and_empty_shapes(shape):
    x = torch.randn(shape)
    f = thunder_rs.jit(lambda x: torch.exp(x).sum() + x.mean() if x.numel() else x.sum())
    torch.testing.assert_close(f(x), (torch.exp(x).sum() + x.mean()) if x.numel() else x.sum())


def test_in_place_ops_are_written_back():
    def f(x, y, z):
        x.mul_(2).add_(y)
        y.zero_()
        z.copy_(x[1])
        x[0, 1:3] = 7.0
        x[2] = z * 10
        return x.sum()

    x, y, z = torch.randn(3, 4), torch.randn(3, 4), torch.empty(4)
    rx, ry, rz = x.clone(), y.clone(), z.clone()
    want = f(rx, ry, rz)
    got = thunder_rs.jit(f)(x, y, z)
    for a, b in [(got, want), (x, rx), (y, ry), (z, rz)]:
        torch.testing.assert_close(a, b)


def test_in_place_on_a_view_is_refused():
    def f(x):
        x[0].add_(1)
        return x

    with pytest.raises(thunder_rs.UnsupportedOpError, match="in-place write to a view"):
        thunder_rs.jit(f)(torch.zeros(2, 2))

    def g(x):
        v = x.view(4)
        x.add_(1)
        return v * 2

    with pytest.raises(thunder_rs.UnsupportedOpError, match="view of a tensor written in place"):
        thunder_rs.jit(g)(torch.zeros(2, 2))


def test_unsupported_op_error_names_op_and_line():
    def f(x):
        y = x + 1
        return torch.cumprod(y, 0)  # the line named

    with pytest.raises(thunder_rs.UnsupportedOpError) as e:
        thunder_rs.jit(f)(torch.randn(3))
    msg = str(e.value)
    assert "torch.cumprod" in msg
    assert "test_api.py" in msg and "return torch.cumprod(y, 0)" in msg


def test_examine_lists_every_unsupported_call():
    def f(x):
        a = torch.cumprod(x, 0)
        b = torch.logcumsumexp(a, 0)
        return torch.kron(b, b) + x.sum()

    found = [name for name, _, _ in thunder_rs.examine(f, torch.randn(3))]
    assert found == ["torch.cumprod", "torch.logcumsumexp", "torch.kron"]
    assert thunder_rs.examine(lambda x: x.relu() * 2, torch.randn(3)) == []


def test_last_traces_and_plugins():
    f = thunder_rs.jit(lambda x: torch.relu(x) * 2)
    assert thunder_rs.last_traces(f) == []
    f(torch.randn(4))
    traces = thunder_rs.last_traces(f)
    assert "ltorch.relu" in traces[0]
    assert "# Executors:" in traces[-1]
    names = [e["name"] for e in thunder_rs.plugins()["executors"]]
    assert "interpreter" in names and "cpu-simd" in names


def test_compile_timings_name_every_stage():
    f = thunder_rs.jit(lambda x: (torch.tanh(x) * 2).sum())
    assert thunder_rs.compile_timings(f) == []
    x = torch.randn(5, requires_grad=True)
    f(x).backward()
    stages = [s for s, _ in thunder_rs.compile_timings(f)]
    assert stages[0] == "python trace"
    assert any(s.startswith("forward:") for s in stages)
    assert any(s.startswith("backward:") for s in stages)
    assert all(sec >= 0.0 for _, sec in thunder_rs.compile_timings(f))
    with pytest.raises(TypeError):
        thunder_rs.compile_timings(lambda x: x)


def test_compile_timings_in_detail_split_each_side():
    f = thunder_rs.jit(lambda x: (torch.tanh(x) * 2).sum())
    x = torch.randn(5, requires_grad=True)
    f(x).backward()
    detail = thunder_rs.compile_timings(f, detail=True)
    for side in ("forward", "backward"):
        stages = [st for sd, st, _ in detail if sd == side]
        assert stages[:3] == ["passes", "executors", "claim"], stages
        assert any(st.startswith("compile ") and st.endswith(" regions)") for st in stages), stages
        assert stages[-1].startswith("compile, elapsed ("), stages
    # The finer stages lie inside the coarse ones: their sum cannot exceed them (the executors'
    # compile seconds are summed over the compile threads: the elapsed line stands for them).
    coarse = dict(thunder_rs.compile_timings(f))
    for side in ("forward", "backward"):
        inner = sum(sec for sd, st, sec in detail if sd == side and not st.endswith(" regions)"))
        assert inner <= coarse[f"{side}: passes + claim + compile"] + 1e-6


def test_graph_stats_are_empty_off_cuda_and_cuda_graphs_must_be_a_bool():
    f = thunder_rs.jit(lambda x: x * 2, cuda_graphs=True)
    assert thunder_rs.graph_stats(f) == {}
    torch.testing.assert_close(f(torch.ones(3)), torch.full((3,), 2.0))
    # CPU programs never replay as CUDA graphs.
    assert thunder_rs.graph_stats(f) == {}
    with pytest.raises(TypeError, match="cuda_graphs must be a bool"):
        thunder_rs.jit(lambda x: x, cuda_graphs="yes")
    with pytest.raises(TypeError):
        thunder_rs.graph_stats(lambda x: x)


def test_backward_twice_through_one_graph_is_refused_clearly():
    f = thunder_rs.jit(lambda x: torch.tanh(x) * 3)
    x = torch.randn(4, requires_grad=True)
    y = f(x)
    y.sum().backward(retain_graph=True)
    torch.testing.assert_close(x.grad, 3 * (1 - torch.tanh(x.detach()) ** 2))
    # The first backward freed what the forward saved (as torch frees save_for_backward's).
    with pytest.raises(RuntimeError, match="backward already ran"):
        y.sum().backward()


def test_closure_constants_become_inputs():
    w = torch.randn(4)
    f = thunder_rs.jit(lambda x: x * w)
    x = torch.randn(4)
    torch.testing.assert_close(f(x), x * w)


def test_more_in_place_ops():
    def f(x, y, m, k):
        x.exp_()
        x /= 2
        x += y
        x.clamp_(min=0.5)
        y.relu_()
        y.masked_fill_(m, -1.0)
        k.fill_(3)
        k[1:, :2] = y[:2, :2].sum(dim=1, keepdim=True)
        return x * y

    args = [torch.randn(3, 4), torch.randn(3, 4), torch.rand(3, 4) > 0.5, torch.zeros(3, 4)]
    ref = [a.clone() for a in args]
    want = f(*ref)
    got = thunder_rs.jit(f)(*args)
    torch.testing.assert_close(got, want)
    for a, b in zip(args, ref):
        torch.testing.assert_close(a, b)


def test_in_place_on_input_requiring_grad_is_refused():
    p = torch.randn(3, requires_grad=True)
    with pytest.raises(thunder_rs.UnsupportedOpError, match="requires grad"):
        thunder_rs.jit(lambda p: p.mul_(2))(p)


def test_index_put_accumulate_and_index_add_in_place():
    def f(x, i, v):
        x.index_put_((i,), v, accumulate=True)
        x.index_add_(0, i, v, alpha=2.0)
        return x.sum(0)

    x, i, v = torch.randn(5, 3), torch.tensor([0, 3, 3, 1]), torch.randn(4, 3)
    rx = x.clone()
    want = f(rx, i, v)
    torch.testing.assert_close(thunder_rs.jit(f)(x, i, v), want)
    torch.testing.assert_close(x, rx)


def test_stream_argument_is_accepted_and_ignored_on_the_cpu():
    """The run call takes the caller's CUDA stream (torch.cuda.current_stream().cuda_stream);
    a CPU program has nothing to order and runs as without one."""
    from thunder_rs import _native
    from thunder_rs._jit import _from_dlpack, _to_dlpack

    x = torch.randn(3, 4)
    f = thunder_rs.jit(lambda a: a * 2 + 1)
    f(x)
    prog = f._last.program
    (cap,), _ = prog.forward([_to_dlpack(x)], 12345)
    torch.testing.assert_close(_from_dlpack(cap), x * 2 + 1)
    (cap,), _ = prog.forward([_to_dlpack(x)], stream=None)
    torch.testing.assert_close(_from_dlpack(cap), x * 2 + 1)
    del _native


def test_square_is_x_times_x():
    x = torch.randn(3, 4, requires_grad=True)
    f = thunder_rs.jit(lambda x: x.square().sum() + torch.square(x).mean())
    out = f(x)
    ref = x.square().sum() + torch.square(x).mean()
    torch.testing.assert_close(out, ref)
    (g,) = torch.autograd.grad(out, x)
    (want,) = torch.autograd.grad(ref, x)
    torch.testing.assert_close(g, want)
