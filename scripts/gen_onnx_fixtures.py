"""Exports tiny random-weight models with PyTorch's ONNX exporters and stores ONNX Runtime's
outputs as fixtures for thunder-onnx's tests (thunder-onnx/tests/fixtures/<model>/).

    /work/venv/bin/python scripts/gen_onnx_fixtures.py [--only vit]

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
from onnx_models import Bert, Gpt2, ResNet, SmallCnn, OpMix, Vit  # noqa: E402

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
    """Ops the importer has no rule for (TopK, CumSum), for `thunder examine`'s list."""

    def forward(self, x):
        y = torch.topk(x, 2, dim=2).values
        return torch.cumsum(y, dim=1).relu()


def unsupported():
    folder = os.path.join(OUT, "unsupported")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    path = os.path.join(folder, "model.onnx")
    export(Unsupported(), (torch.randn(2, 3, 3),), path, ["x"], ["y"], None, dynamo=False)
    print("unsupported:", sorted({n.op_type for n in onnx.load(path).graph.node}))


def vit():
    """A tiny ViT from both exporters (its own seeds, so adding it left the others unchanged)."""
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    model = Vit()
    # nn.MultiheadAttention's inference fast path is one fused aten op no exporter handles.
    torch.backends.mha.set_fastpath_enabled(False)

    def image(b):
        return [rng.standard_normal((b, 3, 32, 32), dtype=np.float32)]

    make("vit_tiny", model, image, [(2,), (1,)], ["pixels"], ["logits"],
         {"pixels": {0: "batch"}}, dynamo=False)
    make("vit_tiny_dynamo", model, image, [(2,), (3,)], ["pixels"], ["logits"],
         {"pixels": {0: "batch"}}, dynamo=True)


def main():
    only = {"vit": vit, "einsum": einsum_cases, "unsupported": unsupported, "pow": pow_cases}
    if len(sys.argv) == 3 and sys.argv[1] == "--only" and sys.argv[2] in only:
        return only[sys.argv[2]]()
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
    op_cases()
    einsum_cases()
    vit()




def case(name, op, inputs, attrs=None, consts=None, n_out=1, opset=17):
    """One single-node model in fixtures/ops/<name>/ with ONNX Runtime's outputs."""
    from onnx import TensorProto, helper

    types = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
             np.int32: TensorProto.INT32, np.int64: TensorProto.INT64, np.bool_: TensorProto.BOOL}
    folder = os.path.join(OUT, "ops", name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    consts = consts or {}
    names = [f"x{i}" for i in range(len(inputs))]
    node_inputs = names + list(consts)
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, node_inputs, outs, **(attrs or {}))
    g_in = [helper.make_tensor_value_info(n, types[a.dtype.type], a.shape)
            for n, a in zip(names, inputs)]
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()]
    g_out = [onnx.ValueInfoProto(name=o) for o in outs]
    graph = helper.make_graph([node], name, g_in, g_out, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = os.path.join(folder, "model.onnx")
    onnx.save_model(model, path)
    feeds = dict(zip(names, inputs))
    try:
        outs = run_ort(path, feeds)
    except Exception as e:  # no ONNX Runtime kernel for this dtype: no reference
        print(f"  skipped {name}: {str(e).splitlines()[0][:100]}")
        shutil.rmtree(folder)
        return
    save_case(folder, "case0", feeds, outs)


def einsum_cases():
    """Einsum in the forms BERT/ViT-style exports use (batched products, transposes, sums,
    `...`, the implicit output), f32 and f64, against ONNX Runtime (fixtures/ops/einsum_*).
    `gen_onnx_fixtures.py --only einsum` writes just these."""
    rng = np.random.default_rng(7)

    def arr(shape, dt=np.float32):
        return rng.standard_normal(shape).astype(dt)

    case("einsum_attention_scores", "Einsum", [arr((2, 3, 4, 5)), arr((2, 3, 6, 5))],
         {"equation": "bhid,bhjd->bhij"}, opset=12)
    case("einsum_attention_context", "Einsum", [arr((2, 3, 4, 6)), arr((2, 3, 6, 5))],
         {"equation": "bhij,bhjd->bhid"}, opset=12)
    case("einsum_heads_projection", "Einsum", [arr((2, 4, 3, 5)), arr((3, 5, 7))],
         {"equation": "bsnh,nhd->bsd"}, opset=12)
    case("einsum_linear_ellipsis", "Einsum", [arr((2, 3, 4)), arr((5, 4))],
         {"equation": "...k,nk->...n"}, opset=12)
    case("einsum_matmul_f64", "Einsum", [arr((3, 4), np.float64), arr((4, 2), np.float64)],
         {"equation": "ij,jk->ik"}, opset=12)
    case("einsum_implicit_output", "Einsum", [arr((3, 4)), arr((4, 2))],
         {"equation": "ij,jk"}, opset=12)
    case("einsum_transpose", "Einsum", [arr((2, 3, 4))], {"equation": "abc->cab"}, opset=12)
    case("einsum_reduce", "Einsum", [arr((2, 3, 4))], {"equation": "abc->b"}, opset=12)
    case("einsum_outer_and_sum", "Einsum", [arr((3,)), arr((4, 2))],
         {"equation": "i,jk->ij"}, opset=12)
    case("einsum_three_operands", "Einsum", [arr((2, 3)), arr((3, 4)), arr((4, 5))],
         {"equation": "ab,bc,cd->ad"}, opset=12)
    case("einsum_batch_dot", "Einsum", [arr((5, 3)), arr((5, 3))],
         {"equation": "bi,bi->b"}, opset=12)
    case("einsum_empty", "Einsum", [arr((0, 3)), arr((3, 2))], {"equation": "ij,jk->ik"}, opset=12)
    case("einsum_scalar_out", "Einsum", [arr((3,)), arr((3,))], {"equation": "i,i->"}, opset=12)


def pow_cases():
    """Pow by the constant exponents thunder-onnx lowers to products or a square root (2, 3,
    4, 0.5, 1; negative bases for the integer powers, a scalar base, an empty one), f32 and
    f64 (fixtures/ops/pow_e*). `gen_onnx_fixtures.py --only pow` writes just these."""
    rng = np.random.default_rng(19)
    for dt in (np.float32, np.float64):
        tag = np.dtype(dt).name
        for e, name in ((2.0, "2"), (3.0, "3"), (4.0, "4"), (1.0, "1")):
            x = (rng.standard_normal((2, 3, 4)) * 3).astype(dt)
            case(f"pow_e{name}_{tag}", "Pow", [x], None, {"e": np.array(e, dt)})
        x = np.abs(rng.standard_normal((3, 4))).astype(dt)
        case(f"pow_e0_5_{tag}", "Pow", [x], None, {"e": np.array([0.5], dt)})
        case(f"pow_e3_scalar_{tag}", "Pow", [np.array(-1.7, dt)], None, {"e": np.array(3.0, dt)})
        case(f"pow_e2_empty_{tag}", "Pow", [np.zeros((0, 3), dt)], None, {"e": np.array(2.0, dt)})


def op_cases():
    """Single-node models built with onnx.helper: scalar () and empty (0,) shapes,
    broadcasting and each dtype ONNX Runtime has a kernel for; outputs from ONNX Runtime.
    Written to fixtures/ops/<case>/ in the same layout as the models (one case each)."""
    rng = np.random.default_rng(1)

    def arr(shape, dt):
        if dt == np.bool_:
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        if np.issubdtype(dt, np.integer):
            return rng.integers(-5, 6, size=shape).astype(dt)
        return rng.standard_normal(shape).astype(dt)

    for dt in (np.float32, np.float64, np.int32, np.int64):
        tag = np.dtype(dt).name
        case(f"add_scalar_{tag}", "Add", [arr((), dt), arr((), dt)])
        case(f"mul_broadcast_{tag}", "Mul", [arr((2, 1, 3), dt), arr((4, 1), dt)])
        case(f"sub_empty_{tag}", "Sub", [arr((0, 3), dt), arr((3,), dt)])
        case(f"div_{tag}", "Div", [arr((5,), dt), np.array([2, -3, 4, 5, -2], dtype=dt)])
        case(f"reducesum_empty_{tag}", "ReduceSum", [arr((0, 3), dt)], {"keepdims": 0},
             {"axes": np.array([0], np.int64)})
        case(f"concat_empty_{tag}", "Concat", [arr((2, 0), dt), arr((2, 3), dt)], {"axis": 1})
        case(f"gather_scalar_{tag}", "Gather", [arr((4, 3), dt)], {"axis": 1},
             {"idx": np.array(-1, np.int64)})
        case(f"where_{tag}", "Where", [arr((2, 3), np.bool_), arr((2, 3), dt), arr((3,), dt)])
        case(f"equal_{tag}", "Equal", [arr((2, 3), dt), arr((1, 3), dt)])
        case(f"cast_to_f32_{tag}", "Cast", [arr((3,), dt)], {"to": TensorProto.FLOAT})
        case(f"max_{tag}", "Max", [arr((2, 3), dt), arr((3,), dt), arr((), dt)])
        case(f"transpose_{tag}", "Transpose", [arr((2, 3, 4), dt)], {"perm": [2, 0, 1]})
    for dt in (np.float32, np.float64):
        tag = np.dtype(dt).name
        case(f"softmax_{tag}", "Softmax", [arr((2, 5), dt)], {"axis": 0})
        case(f"erf_scalar_{tag}", "Erf", [arr((), dt)])
        case(f"sqrt_empty_{tag}", "Sqrt", [np.abs(arr((0,), dt))])
        case(f"pow_{tag}", "Pow", [np.abs(arr((2, 3), dt)), np.array(1.5, dt)])
        case(f"layernorm_{tag}", "LayerNormalization", [arr((2, 3, 4), dt), arr((3, 4), dt)],
             {"axis": -2, "epsilon": 1e-3})
        case(f"reducemean_{tag}", "ReduceMean", [arr((2, 3, 4), dt)], {"axes": [0, 2]})
    case("and_bool", "And", [arr((2, 3), np.bool_), arr((3,), np.bool_)])
    case("not_bool_scalar", "Not", [arr((), np.bool_)])
    case("slice_steps", "Slice", [arr((6, 5), np.float32)], None,
         {"starts": np.array([1, -1], np.int64), "ends": np.array([100, -6], np.int64),
          "axes": np.array([0, 1], np.int64), "steps": np.array([2, -2], np.int64)})
    case("split_uneven", "Split", [arr((7, 2), np.float32)], {"axis": 0, "num_outputs": 3},
         n_out=3, opset=18)
    case("expand_bidirectional", "Expand", [arr((3, 1), np.float32)], None,
         {"shape": np.array([2, 1, 4], np.int64)})
    case("clip_bounds", "Clip", [arr((2, 5), np.float32)], None,
         {"lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)})
    case("gemm_trans", "Gemm", [arr((3, 4), np.float32), arr((5, 3), np.float32),
                                arr((5,), np.float32)],
         {"alpha": 0.5, "beta": 2.0, "transA": 1, "transB": 1})
    case("conv_asymmetric_pads", "Conv", [arr((1, 2, 5, 6), np.float32),
                                          arr((3, 2, 3, 2), np.float32)],
         {"pads": [1, 0, 0, 1], "strides": [2, 1], "dilations": [1, 2]})
    case("conv_groups", "Conv", [arr((2, 4, 5, 5), np.float32), arr((4, 2, 3, 3), np.float32)],
         {"pads": [1, 1, 1, 1], "group": 2})
    case("conv1d", "Conv", [arr((1, 2, 9), np.float32), arr((3, 2, 3), np.float32)],
         {"strides": [2]})
    case("maxpool_same_upper", "MaxPool", [arr((1, 2, 5, 5), np.float32)],
         {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"})
    case("avgpool_pads", "AveragePool", [arr((1, 2, 6, 6), np.float32)],
         {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0})
    case("trilu_lower_k", "Trilu", [arr((2, 4, 5), np.float32)], {"upper": 0},
         {"k": np.array(1, np.int64)})
    case("argmax_keepdims", "ArgMax", [arr((3, 4), np.float32)], {"axis": 1, "keepdims": 1})
    case("range_fold", "Range", [], None, {"s": np.array(2, np.int64), "l": np.array(11, np.int64),
                                          "d": np.array(3, np.int64)})


if __name__ == "__main__":
    main()
