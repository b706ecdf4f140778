#!/usr/bin/env python3
"""A small CNN training step in PyTorch (f64), the reference for tests/tests/cnn_step.rs.

conv2d -> batch_norm (training, running stats updated) -> relu -> max_pool2d -> grouped,
strided conv2d -> group_norm -> adaptive_avg_pool2d -> linear -> cross_entropy, plus the
running statistics batch_norm leaves behind. Writes tests/fixtures/cnn/step.safetensors
(inputs, parameters, loss, every parameter's gradient, the updated running stats).
Deterministic: run it twice and the file is byte-identical.

    /path/to/venv/bin/python scripts/gen_cnn_fixture.py
"""

import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT = os.path.join(REPO, "tests", "fixtures", "cnn", "step.safetensors")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1234)
    f64 = torch.float64

    def r(*shape, scale=1.0):
        return ((torch.rand(shape, generator=g, dtype=f64) * 2 - 1) * scale)

    t = {
        "x": r(4, 3, 8, 8),
        "y": torch.randint(0, 5, (4,), generator=g),
        "w1": r(6, 3, 3, 3, scale=0.5),
        "b1": r(6, scale=0.1),
        "g1": 1 + r(6, scale=0.2),
        "be1": r(6, scale=0.1),
        "rm": r(6, scale=0.1),
        "rv": 1 + r(6, scale=0.2),
        "w2": r(8, 3, 3, 3, scale=0.5),
        "g2": 1 + r(8, scale=0.2),
        "be2": r(8, scale=0.1),
        "w3": r(5, 8, scale=0.5),
        "b3": r(5, scale=0.1),
    }
    params = ["w1", "b1", "g1", "be1", "w2", "g2", "be2", "w3", "b3"]
    leaves = {k: v.clone().requires_grad_(k in params) for k, v in t.items()}
    rm, rv = t["rm"].clone(), t["rv"].clone()
    h = F.conv2d(leaves["x"], leaves["w1"], leaves["b1"], 1, 1)
    h = F.batch_norm(h, rm, rv, leaves["g1"], leaves["be1"], True, 0.1, 1e-5)
    h = F.max_pool2d(F.relu(h), 2)
    h = F.conv2d(h, leaves["w2"], None, 2, 1, 1, 2)
    h = F.group_norm(h, 4, leaves["g2"], leaves["be2"], 1e-5)
    h = F.adaptive_avg_pool2d(h, 1).reshape(4, 8)
    loss = F.cross_entropy(F.linear(h, leaves["w3"], leaves["b3"]), leaves["y"])
    grads = torch.autograd.grad(loss, [leaves[k] for k in params])
    out = dict(t)
    out["loss"] = loss.detach()
    out["rm_new"] = rm
    out["rv_new"] = rv
    for k, gr in zip(params, grads):
        out["grad_" + k] = gr
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, OUT,
              metadata={"generator": "scripts/gen_cnn_fixture.py"})
    print("wrote %s (loss %.6f)" % (os.path.relpath(OUT, REPO), loss.item()))


if __name__ == "__main__":
    main()
