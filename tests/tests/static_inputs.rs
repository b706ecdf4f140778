//! Static inputs (`compile_trace_with_static`, ABI 1.2's `compile_static`): a program whose
//! weight is promised to be the same array on every call gives the interpreter's values on
//! every call, also through a reshape of the weight; the execution trace marks the static
//! inputs; a position that is not an input is an error naming it.

use thunder_core::{Array, DType};
use thunder_tests::{close, default_cpu_host, interpreter_host};

fn values(shape: &[i64], seed: u64) -> Array {
    let a = Array::random(shape, DType::F64, seed).expect("random");
    let v: Vec<f32> = a
        .to_f64_vec()
        .expect("host array")
        .iter()
        .map(|x| x.tanh() as f32)
        .collect();
    Array::from_slice(&v, shape).expect("array")
}

/// `x @ reshape(w)`: 128 rows against a 96 x 1024 weight, a product cpu-simd keeps packed on
/// AVX2 CPUs when the weight is static.
const PROGRAM: &str = "def computation(x, w):\n  # x: \"cpu f32[128, 96]\"\n  \
     # w: \"cpu f32[96, 2, 512]\"\n  \
     t0 = prims.reshape(w, (96, 1024))\n  \
     t1 = prims.matmul(x, t0)\n  \
     return t1\n";

#[test]
fn a_static_weight_gives_the_interpreters_values_on_every_call() {
    let simd = default_cpu_host();
    let interp = interpreter_host();
    let x = values(&[128, 96], 1);
    let w = values(&[96, 2, 512], 2);
    let trace = thunder_torch::parse_trace(PROGRAM).expect("parse");
    let (_, reference) = thunder_core::compile_trace(&interp, trace.clone()).expect("compile");
    let want = reference.run(&[x.clone(), w.clone()]).expect("run")[0]
        .to_f64_vec()
        .expect("host");
    let (traces, program) =
        thunder_core::compile_trace_with_static(&simd, trace, &[1]).expect("compile");
    let printed = traces.execution.print();
    assert!(
        printed.contains("# w: \"cpu f32[96, 2, 512]\" (static)")
            && printed.contains("# x: \"cpu f32[128, 96]\"\n"),
        "the execution trace marks the static input only:\n{printed}"
    );
    // The same weight twice, then another array (another buffer): a caller who breaks the
    // promise still gets the right values.
    for (call, weight) in [w.clone(), w.clone(), values(&[96, 2, 512], 3)]
        .into_iter()
        .enumerate()
    {
        let want = if call < 2 {
            want.clone()
        } else {
            reference.run(&[x.clone(), weight.clone()]).expect("run")[0]
                .to_f64_vec()
                .expect("host")
        };
        let got = program.run(&[x.clone(), weight]).expect("run")[0]
            .to_f64_vec()
            .expect("host");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                close(*g, *w, 1e-5, 1e-5, false),
                "call {call}, element {i}: cpu-simd {g}, interpreter {w}"
            );
        }
    }
}

#[test]
fn a_static_position_past_the_inputs_is_an_error_naming_it() {
    let trace = thunder_torch::parse_trace(PROGRAM).expect("parse");
    let err = match thunder_core::compile_trace_with_static(&interpreter_host(), trace, &[2]) {
        Ok(_) => panic!("a static position past the inputs compiled"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("static input 2") && err.contains("2 inputs"),
        "{err}"
    );
}
