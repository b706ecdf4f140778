"""Exports tiny random-weight models with PyTorch's ONNX exporters and stores ONNX Runtime's
outputs as fixtures for thunder-onnx's tests (thunder-onnx/tests/fixtures/<model>/).

    /work/venv/bin/python scripts/gen_onnx_fixtures.py

Each model folder holds model.onnx and, per case, `<case>.in.<input>.npy` and
`<case>.out.<output>.npy` (ONNX Runtime, CPU execution provider). Models with symbolic dims
(batch, sequence) get cases at two shapes, so the tests exercise specialisation and its
cache. The models are also importable by scripts/onnx_models.py for the peer benchmark at
full size.
"""

import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_models import Bert, Gpt2, ResNet, SmallCnn, OpMix  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "thunder-onnx", "tests", "fixtures")


def export(model, args, path, input_names, output_names, dynamic, dynamo, fold=True):
    model.eval()
    if dynamo:
        shapes = None
        if dynamic:
            dims = {}
            shapes = tuple({k: dims.setdefault(v, torch.export.Dim(v, min=1, max=1024))
                            for k, v in dynamic[n].items()} for n in input_names)
        torch.onnx.export(model, args, path, input_names=input_names,
                          output_names=output_names, dynamo=True,
                          dynamic_shapes=shapes, external_data=False)
    else:
        torch.onnx.export(model, args, path, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic,
                          opset_version=14, dynamo=False, do_constant_folding=fold)


def run_ort(path, feeds):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def save_case(folder, case, feeds, outs):
    for k, v in feeds.items():
        np.save(os.path.join(folder, f"{case}.in.{k}.npy"), v)
    for k, v in outs.items():
        np.save(os.path.join(folder, f"{case}.out.{k}.npy"), v)


def make(name, model, make_inputs, shapes, input_names, output_names, dynamic, dynamo,
         fold=True):
    folder = os.path.join(OUT, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    path = os.path.join(folder, "model.onnx")
    first = make_inputs(*shapes[0])
    with torch.no_grad():
        export(model, tuple(torch.from_numpy(x) for x in first), path, input_names,
               output_names, dynamic, dynamo, fold)
    m = onnx.load(path)
    onnx.save_model(m, path)  # one file (the dynamo exporter may write external data)
    for stray in os.listdir(folder):
        if stray.endswith(".data"):
            os.remove(os.path.join(folder, stray))
    for i, shape in enumerate(shapes):
        feeds = dict(zip(input_names, make_inputs(*shape)))
        save_case(folder, f"case{i}", feeds, run_ort(path, feeds))
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    print(f"{name}: {os.path.getsize(path)} bytes, opset "
          f"{[o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')]}, ops {ops}")
    return path


def external_copy(src_folder, name):
    """The same model with every initializer in an external data file."""
    folder = os.path.join(OUT, name)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(src_folder, folder)
    path = os.path.join(folder, "model.onnx")
    m = onnx.load(path)
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    print(f"{name}: external data, {os.path.getsize(os.path.join(folder, 'weights.bin'))} bytes")


class Unsupported(torch.nn.Module):
    """Ops the importer has no rule for (Einsum, CumSum), for `thunder examine`'s list."""

    def forward(self, x):
        y = torch.einsum("bij,bjk->bik", x, x)
        return torch.cumsum(y, dim=1).relu()


def unsupported():
    folder = os.path.join(OUT, "unsupported")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    path = os.path.join(folder, "model.onnx")
    export(Unsupported(), (torch.randn(2, 3, 3),), path, ["x"], ["y"], None, dynamo=False)
    print("unsupported:", sorted({n.op_type for n in onnx.load(path).graph.node}))


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    vocab = 100

    def bert_inputs(b, s):
        ids = rng.integers(0, vocab, size=(b, s), dtype=np.int64)
        mask = np.ones((b, s), dtype=np.int64)
        mask[0, s // 2:] = 0
        return [ids, mask]

    bert = Bert(vocab=vocab, hidden=32, layers=2, heads=4, ffn=64, max_pos=64)
    dyn = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    make("bert_tiny", bert, bert_inputs, [(2, 8), (1, 5)], ["input_ids", "attention_mask"],
         ["last_hidden_state"], dyn, dynamo=False)
    make("bert_tiny_dynamo", bert, bert_inputs, [(2, 8), (3, 6)],
         ["input_ids", "attention_mask"], ["last_hidden_state"], dyn, dynamo=True)

    def gpt_inputs(b, s):
        return [rng.integers(0, vocab, size=(b, s), dtype=np.int64)]

    gpt = Gpt2(vocab=vocab, hidden=32, layers=2, heads=4, max_pos=64)
    make("gpt2_tiny", gpt, gpt_inputs, [(1, 8), (2, 5)], ["input_ids"], ["logits"],
         {"input_ids": {0: "batch", 1: "sequence"}}, dynamo=True)
    make("gpt2_tiny_legacy", gpt, gpt_inputs, [(1, 8), (2, 5)], ["input_ids"], ["logits"],
         {"input_ids": {0: "batch", 1: "sequence"}}, dynamo=False)

    def image(b, h):
        return [rng.standard_normal((b, 3, h, h), dtype=np.float32)]

    resnet = ResNet(widths=(8, 16), blocks=(1, 1), classes=10)
    with torch.no_grad():  # non-trivial batch-norm statistics
        for mod in resnet.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
    make("resnet_tiny", resnet, image, [(2, 32), (1, 32)], ["pixels"], ["logits"],
         {"pixels": {0: "batch"}}, dynamo=True)
    # Unfolded, so BatchNormalization stays a node.
    make("resnet_tiny_bn", resnet, image, [(1, 32)], ["pixels"], ["logits"],
         {"pixels": {0: "batch"}}, dynamo=False, fold=False)
    make("cnn_small", SmallCnn(), image, [(2, 16)], ["pixels"], ["probs"], None, dynamo=False)

    def opmix_inputs(b):
        return [rng.standard_normal((b, 6, 8), dtype=np.float32)]

    make("opmix", OpMix(), opmix_inputs, [(2,), (3,)], ["x"], ["y", "z"],
         {"x": {0: "batch"}}, dynamo=False)
    external_copy(os.path.join(OUT, "cnn_small"), "cnn_small_external")
    unsupported()


if __name__ == "__main__":
    main()
