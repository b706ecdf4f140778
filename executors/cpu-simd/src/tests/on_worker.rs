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
    // A job the region starts runs in the handed-over state too. (Whether the worker has its
    // own bits back afterwards is `FlushGuard`'s drop, `tests/ftz.rs`: a fresh job here could
    // land on a worker that waits inside another test's region.)
    let again = on_worker::run(|| rayon::scope(|_| ftz::current_bits()));
    assert_eq!(again, caller, "a nested job runs in the handed-over state");
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
    let region = Region::compile(&view, &spec, services(), &[]).expect("compile");
    let conv = 2.0 * (2 * 16 * 9 * 9) as f64 * (8 * 3 * 3) as f64;
    let gemm = 2.0 * (3 * 5 * 4 * 7) as f64;
    assert_eq!(region.product_flops(), conv + gemm);
}

/// The other workers linger in the region while it runs (`on_worker::linger`): its parallel
/// loops, after serial work long enough for a parked worker to have gone to sleep, still give
/// every item to exactly one thread, and the region returns once done.
#[test]
fn parallel_loops_after_serial_work_run_every_item_once() {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    for lingering in [true, false] {
        let total = on_worker::run_lingering(
            || {
                let mut total = 0;
                for round in 0..20 {
                    spin_for(std::time::Duration::from_micros(200));
                    let seen: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
                    (0..64).into_par_iter().for_each(|i| {
                        seen[i].fetch_add(1, Ordering::Relaxed);
                    });
                    assert!(
                        seen.iter().all(|c| c.load(Ordering::Relaxed) == 1),
                        "round {round}, lingering {lingering}: an item ran twice or never"
                    );
                    total += seen.len();
                }
                total
            },
            lingering,
        );
        assert_eq!(total, 20 * 64);
    }
}

/// Overhead of a `join` of two 400 us halves after serial work on the worker, with the other
/// workers lingering and parked; ignored by default: `RAYON_NUM_THREADS=2 cargo test
/// --release -p thunder-cpu-simd linger_bench -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: run it by name with --ignored --nocapture"]
fn linger_bench() {
    use std::time::{Duration, Instant};
    let half = Duration::from_micros(400);
    for gap in [0u64, 50, 300] {
        for lingering in [false, true] {
            let mut extra = on_worker::run_lingering(
                || {
                    (0..300)
                        .map(|_| {
                            spin_for(Duration::from_micros(gap));
                            let t = Instant::now();
                            rayon::join(|| spin_for(half), || spin_for(half));
                            (t.elapsed() - half).as_secs_f64() * 1e6
                        })
                        .collect::<Vec<_>>()
                },
                lingering,
            );
            extra.sort_by(f64::total_cmp);
            eprintln!(
                "serial {gap:3} us, then a join of two 400 us halves, lingering {lingering:5}: \
                 {:6.1} us more than a half (median), p90 {:6.1}",
                extra[150], extra[270]
            );
        }
    }
}

/// What handing a region to a worker costs around it: `on_worker::run` of 200 us of work,
/// after the caller's own gap (the workers park within tens of microseconds of idling), minus
/// the work; ignored by default: `RAYON_NUM_THREADS=2 cargo test --release -p
/// thunder-cpu-simd handoff_bench -- --ignored --nocapture`. On the 2-core Zen 3 KVM guest
/// (two runs): 11-13 us after a 20 us gap, 66-75 after 100 us, 212-272 after 1 ms (a parked
/// worker woken, then the sleeping caller), so back-to-back regions (the GPT-2 block's
/// forward and backward) pay little, and a region after a millisecond of host work pays
/// about a fifth of a millisecond.
#[test]
#[ignore = "a benchmark: run it by name with --ignored --nocapture"]
fn handoff_bench() {
    use std::time::{Duration, Instant};
    let work = Duration::from_micros(200);
    for gap in [0u64, 20, 100, 1000] {
        let mut extra: Vec<f64> = (0..300)
            .map(|_| {
                spin_for(Duration::from_micros(gap));
                let t = Instant::now();
                on_worker::run(|| spin_for(work));
                (t.elapsed() - work).as_secs_f64() * 1e6
            })
            .collect();
        extra.sort_by(f64::total_cmp);
        eprintln!(
            "caller gap {gap:4} us, then 200 us on a worker: {:6.1} us more (median), p90 {:6.1}",
            extra[150], extra[270]
        );
    }
}

/// Regions run on workers from two threads at once, each with parallel loops inside: a worker
/// must not linger for one region while it owes the other its continuation (each waiting on
/// the other would never end). The hang needs both workers to take a region each and then the
/// other's linger job inside a wait, so this test exercises the interleavings rather than
/// forcing that one (before the `OCCUPIED` guard it passed too, in 4 of 4 runs).
#[test]
fn regions_from_two_threads_at_once_both_finish() {
    use rayon::prelude::*;
    let region = |seed: usize| {
        on_worker::run_lingering(
            || {
                (0..40)
                    .map(|round| {
                        spin_for(std::time::Duration::from_micros(30));
                        (0..256usize)
                            .into_par_iter()
                            .map(|i| {
                                spin_for(std::time::Duration::from_micros(2));
                                i * (seed + round)
                            })
                            .sum::<usize>()
                    })
                    .sum::<usize>()
            },
            true,
        )
    };
    let want = |seed: usize| (0..40).map(|r| (seed + r) * 255 * 256 / 2).sum::<usize>();
    for _ in 0..20 {
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| region(1));
            let b = s.spawn(|| region(2));
            (a.join(), b.join())
        });
        assert_eq!(a.ok(), Some(want(1)));
        assert_eq!(b.ok(), Some(want(2)));
    }
}

/// Busy work on this thread for `d` (serial work that keeps the core).
fn spin_for(d: std::time::Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}
