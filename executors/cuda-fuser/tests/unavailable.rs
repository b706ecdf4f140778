//! Without a CUDA driver the plugin is created, reports why it cannot run, claims nothing and
//! refuses to compile with that reason (CI has no GPU; on a GPU machine this says so and stops).

use thunder_abi::export::Executor;
use thunder_abi::RegionSpec;
use thunder_core::host::view::trace_view;
use thunder_cuda_fuser::CudaFuser;
use thunder_torch::parse_trace;

#[test]
fn without_a_driver_nothing_is_claimed_and_compile_says_why() {
    let fuser = CudaFuser::create(thunder_core::host::services::host_services(), &[])
        .expect("created without a GPU");
    let reason = match fuser.available() {
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
        "def computation(x):\n  # x: \"cuda:0 f32[8]\"\n  t0 = prims.exp(x)\n  return (t0,)\n",
    )
    .expect("parses");
    let view = trace_view(&trace, &trace.bsyms);
    assert!(fuser.claim(&view).expect("claim").is_empty());
    let region = RegionSpec {
        ops: vec![0u32].into(),
        inputs: view.inputs.clone(),
        outputs: view.outputs.clone(),
    };
    let err = fuser
        .compile(&view, &region)
        .err()
        .expect("no compile without a driver");
    assert!(
        err.message.contains("no CUDA driver") || err.message.contains("NVRTC"),
        "{err:?}"
    );
}

#[test]
fn unknown_and_mistyped_options_are_refused_by_name() {
    let services = thunder_core::host::services::host_services();
    let err = CudaFuser::create(
        services,
        &[("cache".into(), thunder_abi::OptionValue::Bool(true))],
    )
    .err()
    .expect("unknown option");
    assert!(err.message.contains("unknown option `cache`"), "{err:?}");
    let err = CudaFuser::create(
        services,
        &[("disk_cache".into(), thunder_abi::OptionValue::Int(1))],
    )
    .err()
    .expect("mistyped option");
    assert!(err.message.contains("disk_cache"), "{err:?}");
}
