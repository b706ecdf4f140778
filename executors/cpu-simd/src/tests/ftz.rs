//! Subnormals are flushed while a region runs (on the calling thread and on the workers), and
//! the calling thread's own floating-point state is given back afterwards (`ftz.rs`).

use super::Tb;
use thunder_abi::{ArgView, DTypeCode::F32};

/// `x * 1e-30` on `n` elements of `x`: 1e-10 gives a subnormal (1e-40), 1.0 a normal 1e-30.
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

#[test]
fn subnormal_results_are_flushed_and_the_caller_state_restored() {
    // What the host thread computes before and after a run: IEEE subnormals.
    let tiny = std::hint::black_box(1e-10f32);
    let before = tiny * std::hint::black_box(1e-30f32);
    assert!(
        before > 0.0 && !before.is_normal(),
        "the host keeps subnormals"
    );

    // Two elements (the calling thread) and 2^21 elements (the threaded path).
    for n in [2usize, 1 << 21] {
        let mut xs = vec![1e-10f32; n];
        xs[0] = 1.0;
        let got = scaled(xs);
        assert_eq!(got[0], 1.0f32 * 1e-30f32, "n {n}: a normal result is exact");
        if n > 1 {
            assert!(
                got[1..].iter().all(|&v| v == 0.0),
                "n {n}: subnormals flushed"
            );
        }
    }
    let after = tiny * std::hint::black_box(1e-30f32);
    assert_eq!(before, after, "the host's MXCSR is restored after the run");
}

#[test]
fn subnormal_inputs_read_as_zero() {
    // 1e-40 is subnormal in f32; with DAZ it reads as 0, and 0 * 1e-30 = 0.
    let got = scaled(vec![1e-40f32, 2.0]);
    assert_eq!(got, vec![0.0, 2.0 * 1e-30f32]);
}
