//! The plugin as the host sees it, without a GPU: it is created, loads the bundled packages,
//! reports itself unavailable with the reason, claims nothing (so the host decomposes
//! attention and RMSNorm for other executors) and refuses to compile with that reason.

use thunder_abi::export::Executor;
use thunder_abi::{OptionValue, RegionSpec};
use thunder_core::host::services::host_services;
use thunder_core::host::view::trace_view;
use thunder_torch::parse_trace;
use thunder_triton::Triton;

#[test]
fn without_a_driver_it_is_unavailable_and_claims_nothing() {
    let plugin = Triton::create(host_services(), &[]).expect("created without a GPU");
    assert_eq!(plugin.packages().len(), 27);
    assert!(
        plugin.package_errors().is_empty(),
        "{:?}",
        plugin.package_errors()
    );
    let reason = match plugin.available() {
        Ok(()) => {
            eprintln!("a CUDA driver is present: the no-driver path does not apply here");
            return;
        }
        Err(reason) => reason,
    };
    assert!(reason.contains("no CUDA driver"), "{reason}");
    // An op the bundled packages cover exactly: still not claimed without a driver.
    let trace = parse_trace("def computation(q, k, v):\n  # q: \"cuda:0 bf16[8, 12, 1024, 64]\"\n  # k: \"cuda:0 bf16[8, 12, 1024, 64]\"\n  # v: \"cuda:0 bf16[8, 12, 1024, 64]\"\n  t0 = ltorch.scaled_dot_product_attention(q, k, v, None, True, None)\n  return (t0,)\n").expect("parses");
    let view = trace_view(&trace, &trace.bsyms);
    assert_eq!(view.ops.len(), 1);
    assert!(plugin.claim(&view).expect("claim").is_empty());
    let region = RegionSpec {
        ops: vec![0u32].into(),
        inputs: view.inputs.clone(),
        outputs: view.outputs.clone(),
    };
    let err = plugin
        .compile(&view, &region)
        .err()
        .expect("no compile without a driver");
    assert!(err.message.contains("no CUDA driver"), "{err:?}");
}

#[test]
fn options_are_checked_by_name_and_type() {
    let s = host_services();
    let err = Triton::create(s, &[("kernel_dir".into(), OptionValue::Str("x".into()))])
        .err()
        .expect("unknown option");
    assert!(
        err.message.contains("unknown option `kernel_dir`"),
        "{err:?}"
    );
    let err = Triton::create(s, &[("kernel_dirs".into(), OptionValue::Int(1))])
        .err()
        .expect("mistyped option");
    assert!(err.message.contains("kernel_dirs"), "{err:?}");
    let err = Triton::create(s, &[("bundled".into(), OptionValue::Str("no".into()))])
        .err()
        .expect("mistyped option");
    assert!(err.message.contains("bundled"), "{err:?}");
}

#[test]
fn user_folders_are_loaded_and_their_errors_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    // One good package (a copy of a bundled one) in `a`, one broken in `b`.
    let src = std::path::Path::new(thunder_triton::BUNDLED_DIR).join("rms_norm_f32");
    std::fs::create_dir_all(a.join("mine")).expect("mkdir");
    for e in std::fs::read_dir(&src).expect("bundled") {
        let p = e.expect("entry").path();
        std::fs::copy(&p, a.join("mine").join(p.file_name().expect("name"))).expect("copy");
    }
    std::fs::create_dir_all(b.join("broken")).expect("mkdir");
    std::fs::write(b.join("broken").join("kernel.toml"), "symbol = \"x.y\"\n").expect("write");
    let dirs = std::env::join_paths([&a, &b]).expect("join");
    let plugin = Triton::create(
        host_services(),
        &[
            (
                "kernel_dirs".into(),
                OptionValue::Str(dirs.to_string_lossy().as_ref().into()),
            ),
            ("bundled".into(), OptionValue::Bool(false)),
        ],
    )
    .expect("a broken package is not fatal");
    assert_eq!(
        plugin
            .packages()
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>(),
        ["mine"]
    );
    assert_eq!(plugin.package_errors().len(), 1);
    let e = &plugin.package_errors()[0];
    assert!(
        e.contains("broken/kernel.toml") && e.contains("missing field `args`"),
        "{e}"
    );
}
