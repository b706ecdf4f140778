//! Heavy regions run on a rayon worker (`on_worker.rs`): the same results as on the calling
//! thread, with the calling thread's flush bits, and a panic comes back to the caller.

use super::{data, ints, services, Tb};
use crate::region::Region;
use crate::{ftz, on_worker};
use thunder_abi::{ArgView, DTypeCode::F32, RegionSpec};

/// A 3x3 convolution with bias and ReLU, then `* 1e-39` (subnormal results, which the fused
/// loop must keep on a worker as on the calling thread).
fn conv_then_tiny(t: &mut Tb) -> (Vec<(u32, Vec<f32>)>, u32) {
    let x = t.value(F32, &[2, 8, 9, 9]);
    let w = t.value(F32, &[16, 8, 3, 3]);
    let b = t.value(F32, &[16]);
    let os = [2, 16, 9, 9];
    let c = t.op(
        "convolution",
        vec![
            ArgView::Value(x),
            ArgView::Value(w),
            ArgView::Value(b),
            ints(&[1, 1]),
            ints(&[1, 1]),
            ints(&[1, 1]),
            ArgView::Int(1),
        ],
        F32,
        &os,
    );
    let r = t.op(
        "maximum",
        vec![ArgView::Value(c), ArgView::Float(0.0)],
        F32,
        &os,
    );
    let y = t.op(
        "mul",
        vec![ArgView::Value(r), ArgView::Float(1e-39)],
        F32,
        &os,
    );
    let ins = vec![
        (x, data(2 * 8 * 81, 1)),
        (w, data(16 * 8 * 9, 2)),
        (b, data(16, 3)),
    ];
    (ins, y)
}

#[test]
fn a_region_on_a_worker_gives_the_calling_threads_bits() {
    let mut t = Tb::default();
    let (ins, y) = conv_then_tiny(&mut t);
    let here = t.run(&ins, &[y]).remove(0);
    let there = on_worker::run(|| t.run(&ins, &[y]).remove(0));
    assert!(
        here.iter().any(|v| *v != 0.0 && !v.is_normal()),
        "the check needs subnormal results"
    );
    let (a, b): (Vec<u32>, Vec<u32>) = (
        here.iter().map(|v| v.to_bits()).collect(),
        there.iter().map(|v| v.to_bits()).collect(),
    );
    assert_eq!(a, b);
}

#[test]
fn the_job_runs_on_a_worker_with_the_callers_flush_bits() {
    let caller = ftz::current_bits();
    let (index, bits) = on_worker::run(|| (rayon::current_thread_index(), ftz::current_bits()));
    assert!(index.is_some(), "ran on a worker of the pool");
    assert_eq!(bits, caller);
    {
        // The caller flushing (where flushing is on): so does the job.
        let _flush = ftz::FlushGuard::flush();
        let flushed = ftz::current_bits();
        assert_eq!(on_worker::run(ftz::current_bits), flushed);
    }
    // The worker has its own bits back afterwards: as a fresh job sees them.
    let worker_own = rayon::scope(|_| ftz::current_bits());
    let again = on_worker::run(|| rayon::scope(|_| ftz::current_bits()));
    assert_eq!(again, caller, "a nested job runs in the handed-over state");
    assert_eq!(rayon::scope(|_| ftz::current_bits()), worker_own);
}

#[test]
fn a_panic_in_the_job_resumes_on_the_caller() {
    let r = std::panic::catch_unwind(|| on_worker::run(|| panic!("stage failed")));
    let msg = r.expect_err("the panic comes back");
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"stage failed"));
}

#[test]
fn only_heavy_regions_move() {
    assert!(!on_worker::applies(on_worker::MIN_FLOPS / 2.0));
    let many = rayon::current_num_threads() > 1;
    assert_eq!(on_worker::applies(on_worker::MIN_FLOPS), many);
    // Never from a worker (a region run inside a parallel loop stays where it is).
    assert!(!on_worker::run(|| on_worker::applies(on_worker::MIN_FLOPS)));
}

/// What decides the move: the convolution's `2 * outputs * (C_in/G * kh * kw)` plus the
/// GEMM's `2 m n k`, nothing for the fused loops.
#[test]
fn a_regions_products_are_counted() {
    let mut t = Tb::default();
    let (ins, y) = conv_then_tiny(&mut t);
    let a = t.value(F32, &[3, 5, 7]);
    let b = t.value(F32, &[3, 7, 4]);
    let m = t.op(
        "matmul",
        vec![ArgView::Value(a), ArgView::Value(b)],
        F32,
        &[3, 5, 4],
    );
    let mut ids: Vec<u32> = ins.iter().map(|(id, _)| *id).collect();
    ids.extend([a, b]);
    let view = t.view(&ids, &[y, m]);
    let spec = RegionSpec {
        ops: (0..view.ops.len() as u32).collect(),
        inputs: ids.into(),
        outputs: vec![y, m].into(),
    };
    let region = Region::compile(&view, &spec, services()).expect("compile");
    let conv = 2.0 * (2 * 16 * 9 * 9) as f64 * (8 * 3 * 3) as f64;
    let gemm = 2.0 * (3 * 5 * 4 * 7) as f64;
    assert_eq!(region.product_flops(), conv + gemm);
}
