//! Products (GEMMs) flush subnormals, on the calling thread and on the workers; fused loops
//! keep IEEE subnormals on both; the calling thread's own state is given back (`ftz.rs`).

use super::{ints, Tb};
use crate::ftz;
use thunder_abi::{ArgView, DTypeCode::F32};

/// `x * 1e-30` on the elements of `x`.
fn scaled(xs: Vec<f32>) -> Vec<f32> {
    let mut t = Tb::default();
    let n = xs.len() as i64;
    let x = t.value(F32, &[n]);
    let y = t.op(
        "mul",
        vec![ArgView::Value(x), ArgView::Float(1e-30)],
        F32,
        &[n],
    );
    t.run(&[(x, xs)], &[y]).remove(0)
}

/// `a[n, n] @ b[n, n]` with every element of `a` and `b` 1e-20: each product is 1e-40, a
/// subnormal; their sum n * 1e-40 is not (n >= 128).
fn tiny_products(n: usize) -> Vec<f32> {
    let mut t = Tb::default();
    let s = [n as i64, n as i64];
    let a = t.value(F32, &s);
    let b = t.value(F32, &s);
    let bt = t.op("transpose", vec![ArgView::Value(b), ints(&[1, 0])], F32, &s);
    let c = t.op(
        "matmul",
        vec![ArgView::Value(a), ArgView::Value(bt)],
        F32,
        &s,
    );
    t.run(&[(a, vec![1e-20; n * n]), (b, vec![1e-20; n * n])], &[c])
        .remove(0)
}

fn host_product() -> f32 {
    std::hint::black_box(1e-10f32) * std::hint::black_box(1e-30f32)
}

#[test]
fn fused_loops_keep_subnormals_on_every_thread() {
    let before = host_product();
    assert!(
        before > 0.0 && !before.is_normal(),
        "the host keeps subnormals"
    );
    // Two elements run on the calling thread, 2^21 on the workers; inside a region on a
    // worker, 2^15 split among the lingering workers.
    for n in [2usize, 1 << 15, 1 << 21] {
        let got = scaled(vec![1e-10f32; n]);
        assert!(got.iter().all(|&v| v == before), "n {n}: IEEE subnormals");
        let got = crate::on_worker::run(|| scaled(vec![1e-10f32; n]));
        assert!(got.iter().all(|&v| v == before), "n {n} on a worker");
    }
    assert_eq!(
        scaled(vec![1e-40, 2.0]),
        vec![1e-40f32 * 1e-30, 2.0 * 1e-30f32]
    );
}

#[test]
fn products_flush_subnormals_and_the_caller_state_is_restored() {
    let before = host_product();
    // 8x8 runs on the calling thread, 256x256 on the workers (gemm's threads).
    for n in [8usize, 256] {
        let got = tiny_products(n);
        assert!(got.iter().all(|&v| v == 0.0), "n {n}: flushed products");
    }
    assert_eq!(
        host_product(),
        before,
        "the host's MXCSR is restored after the run"
    );
}

#[test]
fn a_guard_gives_the_threads_state_back() {
    let before = ftz::current_bits();
    {
        let _flush = ftz::FlushGuard::flush();
        let flushed = ftz::current_bits();
        {
            let _ieee = ftz::FlushGuard::ieee();
            assert_eq!(ftz::current_bits(), 0);
        }
        assert_eq!(ftz::current_bits(), flushed);
    }
    assert_eq!(ftz::current_bits(), before);
}

/// A loop's pieces run in the state of the thread that started it, whatever state the worker
/// that takes a piece is in (its own flushing one, or a region's it waits inside).
#[test]
fn a_carried_loop_runs_in_its_starters_state_on_every_thread() {
    use rayon::prelude::*;
    for flush in [false, true] {
        let _state = if flush {
            ftz::FlushGuard::flush()
        } else {
            ftz::FlushGuard::ieee()
        };
        let want = ftz::current_bits();
        let seen: Vec<(Option<usize>, u32)> = (0..256)
            .into_par_iter()
            .map(ftz::carried(|_: usize| {
                (rayon::current_thread_index(), ftz::current_bits())
            }))
            .collect();
        assert!(
            seen.iter().any(|(w, _)| w.is_some()),
            "pieces ran on workers"
        );
        assert!(
            seen.iter().all(|&(_, b)| b == want),
            "flush {flush}: {seen:?}"
        );
    }
}
