"""thunder_rs against plain PyTorch: models forward and backward, optimizer loops."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import thunder_rs


def _close(a, b, tol=1e-4):
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def _check_fwd_bwd(model, *inputs, tol=1e-4):
    jm = thunder_rs.jit(model)
    out = jm(*inputs)
    ref = model(*inputs)
    _close(out, ref, tol)
    (out.square().sum()).backward()
    got = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    ref.square().sum().backward()
    for n, p in model.named_parameters():
        _close(got[n], p.grad, tol)
    model.zero_grad()
    return jm


def test_mlp_forward_backward():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))
    _check_fwd_bwd(mlp, torch.randn(6, 8))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2)
        self.fc = nn.Linear(8 * 3 * 3, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.relu(self.c2(x))
        return self.fc(torch.flatten(x, 1))


def test_cnn_forward_backward():
    torch.manual_seed(0)
    _check_fwd_bwd(CNN(), torch.randn(2, 3, 16, 16), tol=1e-3)


class Block(nn.Module):
    """nanoGPT's block: causal self-attention with a registered mask buffer, and an MLP."""

    def __init__(self, n_embd=32, n_head=4, block_size=16):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.proj = nn.Linear(4 * n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def attn(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


def test_nanogpt_block_forward_backward():
    torch.manual_seed(0)
    _check_fwd_bwd(Block(), torch.randn(2, 12, 32), tol=1e-3)


def test_sdpa_block_matches():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, 16, requires_grad=True) for _ in range(3))

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    jf = thunder_rs.jit(f)
    out = jf(q, k, v)
    ref = f(q, k, v)
    _close(out, ref, 1e-4)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), g)
    want = torch.autograd.grad(ref, (q, k, v), g)
    for a, b in zip(got, want):
        _close(a, b, 1e-4)


def test_optimizer_loop_matches_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    ref = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    ref.load_state_dict(model.state_dict())
    jm = thunder_rs.jit(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ropt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    x, t = torch.randn(8, 4), torch.randint(0, 2, (8,))
    for _ in range(5):
        for m, o in [(jm, opt), (ref, ropt)]:
            o.zero_grad()
            F.cross_entropy(m(x), t).backward()
            o.step()
    for a, b in zip(model.parameters(), ref.parameters()):
        _close(a.detach(), b.detach(), 1e-4)
    assert jm.cache_misses == 1 and jm.cache_hits == 4


def test_jitted_sgd_step_in_place():
    """An optimizer update written in place, jitted: the caller's tensors change."""
    torch.manual_seed(0)
    params = [torch.randn(5, 3), torch.randn(3)]
    grads = [torch.randn(5, 3), torch.randn(3)]
    bufs = [torch.zeros(5, 3), torch.zeros(3)]

    def sgd_momentum(params, grads, bufs, lr: float, momentum: float):
        for p, g, b in zip(params, grads, bufs):
            b.mul_(momentum).add_(g)
            p.add_(b, alpha=-lr)

    want_p = [p.clone() for p in params]
    want_b = [b.clone() for b in bufs]
    step = thunder_rs.jit(sgd_momentum)
    for _ in range(3):
        sgd_momentum(want_p, grads, want_b, 0.1, 0.9)
        assert step(params, grads, bufs, 0.1, 0.9) is None
    for a, b in zip(params + bufs, want_p + want_b):
        _close(a, b, 1e-6)
    assert step.cache_misses == 1


def test_retrace_on_new_signature():
    f = thunder_rs.jit(lambda x: x * 2)
    f(torch.ones(3))
    f(torch.ones(3))
    f(torch.ones(4))
    f(torch.ones(4, dtype=torch.float64))
    assert (f.cache_misses, f.cache_hits) == (3, 1)


class _Shared(nn.Module):
    """Tied weights, a submodule used twice, a None parameter and a None buffer, and buffers
    registered on the parent and on a child: every way named_parameters() and named_buffers()
    skip or dedupe a tensor."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.inner = nn.Linear(6, 6)
        self.pair = nn.ModuleList([self.inner, nn.Linear(6, 6, bias=False)])
        self.head = nn.Linear(6, 10, bias=False)
        self.head.weight = self.emb.weight
        self.register_parameter("unused", None)
        self.register_buffer("scale", torch.tensor(0.5))
        self.register_buffer("nothing", None)
        self.pair[1].register_buffer("shift", torch.full((6,), 0.25))

    def forward(self, ids):
        h = self.emb(ids)
        h = torch.tanh(self.inner(h))
        h = self.pair[0](h) + self.pair[1](h) + self.pair[1].shift
        return self.head(h) * self.scale


def test_a_cached_call_reads_the_module_tensors_in_named_order():
    torch.manual_seed(0)
    m = _Shared()
    jm = thunder_rs.jit(m)
    ids = torch.tensor([[1, 2, 3], [4, 5, 9]])
    named = [t for _, t in m.named_parameters()] + [b for _, b in m.named_buffers() if b is not None]
    assert [id(t) for t in jm._module_tensors()] == [id(t) for t in named]
    out = jm(ids)
    out.sum().backward()
    grads = {n: p.grad.clone() for n, p in m.named_parameters()}
    m.zero_grad()
    want = m(ids)
    want.sum().backward()
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-6)
    for n, p in m.named_parameters():
        torch.testing.assert_close(grads[n], p.grad, rtol=1e-5, atol=1e-6)
    # A cached call sees a replaced parameter and buffer (new tensors, same shapes).
    m.zero_grad()
    with torch.no_grad():
        m.inner.weight = nn.Parameter(torch.randn(6, 6))
        m.scale = torch.tensor(2.0)
    out = jm(ids)
    assert jm.cache_hits >= 1
    torch.testing.assert_close(out, m(ids), rtol=1e-5, atol=1e-6)


class _Reordered(nn.Module):
    """A module whose named_parameters() is not the default walk (reversed)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def named_parameters(self, *args, **kwargs):
        return reversed(list(super().named_parameters(*args, **kwargs)))

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_a_module_with_its_own_parameter_order_is_called_by_names():
    torch.manual_seed(0)
    m = _Reordered()
    jm = thunder_rs.jit(m)
    x = torch.randn(3, 4)
    with torch.no_grad():
        first = jm(x)
        second = jm(x)
        want = m(x)
    assert jm._walk_differs
    torch.testing.assert_close(first, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(second, want, rtol=1e-5, atol=1e-6)
