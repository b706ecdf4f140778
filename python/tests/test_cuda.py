"""thunder_rs on CUDA tensors (skipped without a GPU): results against PyTorch, DLPack zero-copy."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import thunder_rs

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def test_cuda_dlpack_zero_copy_identity():
    from thunder_rs import _native
    from thunder_rs._jit import _from_dlpack, _to_dlpack

    x = torch.randn(8, 8, device="cuda")
    prog = _native.Program([("x", [8, 8], "f32", "cuda:0", False)], [], [0])
    (cap,), _ = prog.forward([_to_dlpack(x)])
    y = _from_dlpack(cap)
    assert y.device == x.device and y.data_ptr() == x.data_ptr()


def test_cuda_elementwise_and_reduction():
    x = torch.randn(257, 33, device="cuda")
    f = thunder_rs.jit(lambda x: (torch.tanh(x) * 2 + 1).sum(dim=1))
    out = f(x)
    assert out.device == x.device
    torch.testing.assert_close(out, (torch.tanh(x) * 2 + 1).sum(dim=1), rtol=1e-4, atol=1e-4)
    # The result is ready for torch on its own stream, and torch's pending writes are seen.
    x.mul_(0)
    torch.testing.assert_close(f(x), torch.full((257,), 33.0, device="cuda"))


def test_cuda_mlp_forward_backward():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 8)).cuda()
    x = torch.randn(32, 16, device="cuda")
    jm = thunder_rs.jit(mlp)
    out = jm(x)
    ref = mlp(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    F.mse_loss(out, torch.zeros_like(out)).backward()
    got = [p.grad.clone() for p in mlp.parameters()]
    mlp.zero_grad()
    F.mse_loss(ref, torch.zeros_like(ref)).backward()
    for a, p in zip(got, mlp.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-4, atol=1e-4)
    ex = thunder_rs.last_traces(jm)[-1]
    assert "cuda" in ex


def test_cuda_nanogpt_block_forward_backward():
    from test_models import Block

    torch.manual_seed(0)
    blk = Block().cuda()
    x = torch.randn(2, 12, 32, device="cuda")
    jm = thunder_rs.jit(blk)
    out = jm(x)
    ref = blk(x)
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)
    out.square().sum().backward()
    got = {n: p.grad.clone() for n, p in blk.named_parameters()}
    blk.zero_grad()
    ref.square().sum().backward()
    for n, p in blk.named_parameters():
        torch.testing.assert_close(got[n], p.grad, rtol=1e-3, atol=1e-3)


def test_cuda_runs_are_ordered_with_torchs_current_stream():
    """torch's current stream is handed to the run (no host synchronization): torch's pending
    work on a side stream is seen by the run, and work torch queues after the call on that
    stream sees thunder's outputs; outputs freed while torch's work on them is queued stay
    valid until it ran."""
    f = thunder_rs.jit(lambda x, w: torch.relu(x @ w) + 1)
    side = torch.cuda.Stream()
    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    want = torch.relu(x @ w) + 1
    f(x, w)  # compile outside the timed part
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        for _ in range(3):
            side_x = x * 1.0  # pending work on the side stream writes the input...
            side_x = (side_x @ w) @ w.t() / 1024 * 0 + x  # ...and keeps the stream busy
        out = f(side_x, w)  # ...which the run must wait for on the device
        later = out * 2  # torch's work after the call, on the same stream
        del out  # freed while `later` may still be queued: its memory must not be reused early
        for _ in range(4):
            f(x, w)
    side.synchronize()
    torch.testing.assert_close(later, want * 2, rtol=1e-3, atol=1e-2)


def test_cuda_backward_on_a_side_stream():
    lin = nn.Linear(64, 64).cuda()
    jm = thunder_rs.jit(lin)
    x = torch.randn(128, 64, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        jm(x).square().sum().backward()
    side.synchronize()
    got = [p.grad.clone() for p in lin.parameters()]
    lin.zero_grad()
    lin(x).square().sum().backward()
    for a, p in zip(got, lin.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main([__file__, "-v"]))


def test_cuda_graph_replay_matches_and_keeps_held_outputs():
    torch.manual_seed(0)
    lin = nn.Linear(256, 8192, bias=False).cuda()  # an 8 MiB output for 256 rows: handed out
    f = thunder_rs.jit(lin, cuda_graphs=True)
    x = torch.randn(256, 256, device="cuda")
    with torch.no_grad():
        for _ in range(4):  # two warm-up runs, a capture, a replay
            torch.testing.assert_close(f(x), lin(x), rtol=1e-4, atol=1e-4)
        st = thunder_rs.graph_stats(f)["forward"]
        assert st["captures"] == 1 and st["graph_runs"] == 2 and st["eager_runs"] == 2, st
        held = f(x)
        kept = held.clone()
        x.mul_(-1)
        torch.testing.assert_close(f(x), lin(x), rtol=1e-4, atol=1e-4)
        torch.cuda.synchronize()
        assert torch.equal(held, kept)
        assert thunder_rs.graph_stats(f)["forward"]["eager_runs"] == 3
