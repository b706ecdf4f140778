"""Reference trajectories of torch.optim.SGD (momentum, weight decay) and torch.optim.AdamW for
three steps with fixed gradients, stored as tests/fixtures/optim.safetensors.

Run from the repo root: python scripts/gen_optim_fixtures.py (needs torch and safetensors).
Tensors: p0 (initial parameter, f32 [3, 4]), g1..g3 (gradients of steps 1..3),
sgd1..sgd3 and adamw1..adamw3 (the parameter after each step).
"""
import torch
from safetensors.torch import save_file


def main():
    torch.manual_seed(0)
    p0 = torch.randn(3, 4)
    grads = [torch.randn(3, 4) for _ in range(3)]
    out = {"p0": p0.clone()}
    for i, g in enumerate(grads):
        out[f"g{i + 1}"] = g.clone()
    for name, make in [
        ("sgd", lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=1e-2)),
        ("adamw", lambda p: torch.optim.AdamW([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)),
    ]:
        p = torch.nn.Parameter(p0.clone())
        opt = make(p)
        for i, g in enumerate(grads):
            p.grad = g.clone()
            opt.step()
            out[f"{name}{i + 1}"] = p.detach().clone()
    save_file(out, "tests/fixtures/optim.safetensors")
    print("wrote tests/fixtures/optim.safetensors")


if __name__ == "__main__":
    main()
