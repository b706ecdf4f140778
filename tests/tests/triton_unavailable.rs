//! The triton plugin through the real host, without a CUDA driver: the cdylib loads (ABI and
//! layout checks pass, its options reach `create`), it says why it is unavailable, and a
//! program with attention and RMSNorm still runs, decomposed, on the CPU executors.
//! On a machine with a driver these tests say so and check nothing: scripts/gpu/triton_check.sh
//! covers that side.

use thunder_core::{Array, DType};
use thunder_tests::{interpreter_library, target_dir};
use thunder_torch::parse_trace;

fn triton_library() -> std::path::PathBuf {
    let lib = target_dir().join(format!(
        "{}thunder_triton{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        lib.exists(),
        "{} is missing: build the workspace first",
        lib.display()
    );
    lib
}

fn config(options: &str) -> thunder_core::host::Config {
    let text = format!(
        "[[executor]]\nname = \"triton\"\nlibrary = \"{}\"\npriority = 50\n{options}\n[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\n",
        triton_library().display(),
        interpreter_library().display()
    );
    thunder_core::host::Config::parse(&text, std::path::Path::new("<test>")).expect("config")
}

#[test]
fn triton_loads_reports_no_driver_and_the_decomposition_runs() {
    if thunder_core::cuda::device_count().is_ok() {
        eprintln!("this machine has a CUDA driver: the no-driver checks do not apply");
        return;
    }
    let host = thunder_core::PluginHost::load(&config(""), &[]);
    assert!(host.issues().is_empty(), "{:?}", host.issues());
    let e = host
        .entries()
        .iter()
        .find(|e| e.name == "triton")
        .expect("triton entry");
    assert_eq!(e.devices, vec!["cuda".to_string()]);
    assert!(e
        .symbols
        .contains(&"ltorch.scaled_dot_product_attention".to_string()));
    let reason = e.available.as_ref().expect_err("no driver here");
    assert!(reason.contains("no CUDA driver"), "{reason}");
    assert!(!e.is_active());

    let trace = parse_trace("def computation(q, k, v, w):\n  # q: \"cpu f32[1, 2, 4, 8]\"\n  # k: \"cpu f32[1, 2, 4, 8]\"\n  # v: \"cpu f32[1, 2, 4, 8]\"\n  # w: \"cpu f32[8]\"\n  t0 = ltorch.scaled_dot_product_attention(q, k, v, None, True, None)\n  t1 = ltorch.rms_norm(t0, [8], w, None)\n  return (t1,)\n").expect("parses");
    let inputs: Vec<Array> = (0..4)
        .map(|i| {
            let shape: &[i64] = if i == 3 { &[8] } else { &[1, 2, 4, 8] };
            Array::random(shape, DType::F32, i).expect("random")
        })
        .collect();
    let (traces, program) = thunder_core::compile_trace(&host, trace).expect("compiles");
    assert!(traces
        .execution
        .steps
        .iter()
        .all(|s| s.executor == "interpreter"));
    let out = program.run(&inputs).expect("runs");
    assert_eq!(out[0].shape(), [1, 2, 4, 8]);
}

#[test]
fn a_mistyped_option_is_a_create_error_naming_it() {
    let host =
        thunder_core::PluginHost::load(&config("[executor.options]\nkernel_dirs = 3\n"), &[]);
    let text = format!("{:?}", host.issues());
    assert!(text.contains("kernel_dirs"), "{text}");
}
