//! Claim decisions: what the library takes (one op per region) and what it leaves, per prim
//! and dtype, and the "CUDA unavailable" path (CI has no GPU).

use thunder_abi::export::Executor;
use thunder_abi::prims::Prim;
use thunder_abi::RegionSpec;
use thunder_core::host::view::trace_view;
use thunder_cuda_kernels::{accepts, claims, plugin_info, spec, CudaKernels};
use thunder_torch::parse_trace;

const DTYPES: [&str; 10] = [
    "b8", "u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64",
];

/// Whether the one op of `body` (inputs declared in `decls`) is accepted; false when the
/// prim's meta already refuses it at trace time (b8 sums, b8 iota: nothing to claim).
fn accepted(decls: &[(&str, String)], body: &str) -> bool {
    let mut text = format!(
        "def computation({}):\n",
        decls.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    );
    for (n, t) in decls {
        text.push_str(&format!("  # {n}: \"{t}\"\n"));
    }
    text.push_str(&format!("  {body}\n  return (t0,)\n"));
    let Ok(trace) = parse_trace(&text) else {
        return false;
    };
    let view = trace_view(&trace, &trace.bsyms);
    assert_eq!(view.ops.len(), 1, "{text}");
    accepts(&view, &view.ops[0])
}

fn x(dtype: &str, shape: &str) -> (&'static str, String) {
    ("x", format!("cuda:0 {dtype}[{shape}]"))
}

#[test]
fn reductions_take_every_dtype_the_interpreter_does() {
    for d in DTYPES {
        let is_bool = d == "b8";
        for (op, bool_ok) in [
            ("sum", false),
            ("prod", false),
            ("amax", true),
            ("amin", true),
        ] {
            assert_eq!(
                accepted(&[x(d, "3, 4")], &format!("t0 = prims.{op}(x, [1])")),
                !is_bool || bool_ok,
                "{op} {d}"
            );
        }
        assert!(
            accepted(&[x(d, "3, 4")], "t0 = prims.argmax(x, 0)"),
            "argmax {d}"
        );
        assert!(
            accepted(&[x(d, "")], "t0 = prims.sum(x, [])") || is_bool,
            "0-d sum {d}"
        );
        assert_eq!(
            accepted(&[x(d, "2, 3")], "t0 = prims.cumsum(x, 1)"),
            !is_bool,
            "cumsum {d}"
        );
    }
    // Empty tensors: sums of nothing are 0; the extreme of an empty dim is an error everywhere.
    assert!(accepted(&[x("f32", "5, 0")], "t0 = prims.sum(x, [1])"));
    assert!(!accepted(&[x("f32", "5, 0")], "t0 = prims.amax(x, [1])"));
    assert!(accepted(&[x("f32", "0, 5")], "t0 = prims.amax(x, [1])"));
    assert!(!accepted(&[x("i32", "5, 0")], "t0 = prims.argmin(x, 1)"));
    // Host tensors are the host executors'.
    assert!(!accepted(
        &[("x", "cpu f32[3]".into())],
        "t0 = prims.sum(x, [0])"
    ));
}

#[test]
fn sorts_are_claimed_up_to_the_shared_memory_limit() {
    let n = spec::MAX_SORT;
    let one = |shape: &str| {
        let text = format!(
            "def computation(x):\n  # x: \"cuda:0 f32[{shape}]\"\n  t0, t1 = prims.sort(x, 1, False, True)\n  return (t0, t1)\n"
        );
        let trace = parse_trace(&text).expect("parses");
        let view = trace_view(&trace, &trace.bsyms);
        accepts(&view, &view.ops[0])
    };
    assert!(one(&format!("2, {n}")));
    assert!(
        !one(&format!("2, {}", n + 1)),
        "longer rows are refused at claim time"
    );
    assert!(one("0, 7"));
}

#[test]
fn indexing_factories_and_the_rest() {
    let idx = ("i", "cuda:0 i64[3]".to_string());
    for d in DTYPES {
        assert!(
            accepted(&[x(d, "4, 5"), idx.clone()], "t0 = prims.take(x, i, 0)"),
            "take {d}"
        );
        assert!(
            accepted(
                &[],
                &format!("t0 = prims.full([2, 3], 1, devices.cuda0, dtypes.{d})")
            ),
            "full {d}"
        );
        assert_eq!(
            accepted(
                &[],
                &format!("t0 = prims.iota(4, 0, 1, devices.cuda0, dtypes.{d})")
            ),
            d != "b8",
            "iota {d}"
        );
        let float = matches!(d, "f16" | "bf16" | "f32" | "f64");
        assert_eq!(
            accepted(
                &[],
                &format!("t0 = prims.uniform([3], 0.0, 1.0, 1, 0, devices.cuda0, dtypes.{d})")
            ),
            float,
            "uniform {d}"
        );
        let y = ("y", format!("cuda:0 {d}[3, 2]"));
        assert_eq!(
            accepted(&[x(d, "2, 3"), y], "t0 = prims.matmul(x, y)"),
            d != "b8",
            "matmul {d} (cuBLAS asks first for floats)"
        );
        assert_eq!(
            accepted(&[x(d, "3")], "t0 = prims.floor_divide(x, 2)"),
            d != "b8",
            "floor_divide {d}"
        );
        // The integer rules that can fail (a zero divisor, a negative exponent) run here with
        // the device error flag; floats are cuda-fuser's elementwise math, b8 is undefined.
        let int = !float && d != "b8";
        for op in ["div", "remainder", "fmod", "pow"] {
            let y = ("y", format!("cuda:0 {d}[2, 3]"));
            assert_eq!(
                accepted(&[x(d, "2, 3"), y], &format!("t0 = prims.{op}(x, y)")),
                int,
                "{op} {d}"
            );
            for shape in ["", "0"] {
                assert_eq!(
                    accepted(&[x(d, shape)], &format!("t0 = prims.{op}(x, 3)")),
                    int,
                    "{op} {d}[{shape}] with a literal"
                );
            }
        }
        // Integer convolution (1-, 2- and 3-d, with a bias); floats are cuDNN's.
        for (xs, ws) in [
            ("2, 4, 7", "6, 2, 3"),
            ("1, 2, 5, 5", "4, 1, 3, 3"),
            ("1, 2, 3, 3, 3", "2, 2, 2, 2, 2"),
        ] {
            let spatial = ws.split(", ").count() - 2;
            let ones = vec!["1"; spatial].join(", ");
            let zeros = vec!["0"; spatial].join(", ");
            let groups = if spatial == 3 { 1 } else { 2 };
            let w = ("w", format!("cuda:0 {d}[{ws}]"));
            let c_out = ws.split(", ").next().unwrap_or("0");
            let b = ("b", format!("cuda:0 {d}[{c_out}]"));
            assert_eq!(
                accepted(
                    &[x(d, xs), w, b],
                    &format!(
                        "t0 = prims.convolution(x, w, b, [{ones}], [{zeros}], [{ones}], {groups})"
                    )
                ),
                int,
                "convolution {d} [{xs}] * [{ws}]"
            );
        }
    }
    assert!(
        !accepted(&[x("i32", "3")], "t0 = prims.remainder(x, 2.5)"),
        "a float literal in an integer op is refused by the interpreter too"
    );
    // The index must be an integer tensor; pads with and without interior padding.
    assert!(!accepted(
        &[x("f32", "4"), ("i", "cuda:0 f32[3]".into())],
        "t0 = prims.take(x, i, 0)"
    ));
    assert!(accepted(
        &[x("f32", "4")],
        "t0 = prims.pad(x, 0.0, [1, 1, 2])"
    ));
    assert!(
        !accepted(&[x("i32", "4")], "t0 = prims.pad(x, 0.5, [1, 1, 2])"),
        "0.5 does not fit i32"
    );
    // Layout and elementwise prims are cuda-fuser's, convolution cudnn's.
    assert!(!accepted(
        &[x("f32", "4")],
        "t0 = prims.slice(x, [0], [2], [1])"
    ));
    assert!(!accepted(&[x("f32", "4")], "t0 = prims.exp(x)"));
}

#[test]
fn every_prim_has_a_decision_and_the_advertised_symbols_match_it() {
    let info = plugin_info();
    for &p in Prim::ALL {
        let listed = info.symbols.iter().any(|s| s.as_str() == p.id());
        assert_eq!(listed, spec::claimable(p), "{}", p.id());
    }
    assert!(spec::claimable(Prim::Argmax) && spec::claimable(Prim::Cumsum));
    assert!(!spec::claimable(Prim::Add) && !spec::claimable(Prim::Exp));
    assert!(spec::claimable(Prim::Convolution) && spec::claimable(Prim::Remainder));
}

#[test]
fn one_region_per_op() {
    let trace = parse_trace(
        "def computation(x):\n  # x: \"cuda:0 f32[4, 6]\"\n  t0 = prims.argmax(x, 1)\n  t1 = prims.exp(x)\n  t2, t3 = prims.var_mean(x, [1], 0)\n  return (t0, t1, t2, t3)\n",
    )
    .expect("parses");
    let view = trace_view(&trace, &trace.bsyms);
    assert_eq!(claims(&view), vec![vec![0], vec![2]]);
}

#[test]
fn without_a_driver_nothing_is_claimed_and_compile_says_why() {
    let k = CudaKernels::create(thunder_core::host::services::host_services(), &[])
        .expect("created without a GPU");
    let reason = match k.available() {
        Ok(()) => {
            eprintln!("a CUDA driver is present: the no-driver path does not apply here");
            return;
        }
        Err(reason) => reason,
    };
    assert!(
        reason.contains("no CUDA driver") || reason.contains("NVRTC"),
        "{reason}"
    );
    let trace = parse_trace(
        "def computation(x):\n  # x: \"cuda:0 f32[8]\"\n  t0 = prims.cumsum(x, 0)\n  return (t0,)\n",
    )
    .expect("parses");
    let view = trace_view(&trace, &trace.bsyms);
    assert!(k.claim(&view).expect("claim").is_empty());
    let region = RegionSpec {
        ops: vec![0u32].into(),
        inputs: view.inputs.clone(),
        outputs: view.outputs.clone(),
    };
    let err = k
        .compile(&view, &region)
        .err()
        .expect("no compile without a driver");
    assert!(err.message.contains("cuda-kernels"), "{err:?}");
}

#[test]
fn unknown_options_are_refused_by_name() {
    let services = thunder_core::host::services::host_services();
    let err = CudaKernels::create(
        services,
        &[("tile".into(), thunder_abi::OptionValue::Int(3))],
    )
    .err()
    .expect("refused");
    assert!(err.message.contains("`tile`"), "{err:?}");
}
