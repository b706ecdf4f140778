//! Products against a kept packed weight (`prepack.rs`): the kernel against an f64
//! reference, the packing kept while the weight is unchanged and made again when it changes,
//! and a region compiled with a static weight against one compiled without.

use super::{assert_close, data, services, Tb};
use crate::gemm_run::View;
use crate::prepack::PackedSlot;
use crate::region::Region;
use std::sync::Arc;
use thunder_abi::export::CompiledRegion;
use thunder_abi::{ArgView, DTypeCode, ExecContext, RegionSpec};

fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// `a[m, k] @ w[k, n]` in f64, `w` stored row-major or (`wt`) transposed.
fn reference(a: &[f32], w: &[f32], (m, k, n): (usize, usize, usize), wt: bool) -> Vec<f64> {
    let mut out = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k)
                .map(|p| {
                    let wv = if wt { w[j * k + p] } else { w[p * n + j] };
                    a[i * k + p] as f64 * wv as f64
                })
                .sum();
        }
    }
    out
}

fn weight_view(w: &[f32], k: usize, n: usize, wt: bool) -> View<f32> {
    View {
        ptr: w.as_ptr(),
        rs: if wt { 1 } else { n as isize },
        cs: if wt { k as isize } else { 1 },
    }
}

/// Row tiles cover a block's rows once, in order, with one to six rows each, and none under
/// three once the block has six rows (a short tile costs nearly a full one).
#[test]
fn row_tiles_cover_the_rows_without_short_tiles() {
    for mc in 1..=200 {
        let tiles: Vec<(usize, usize)> = crate::prepack::row_tiles(mc).collect();
        let mut next = 0;
        for &(first, rows) in &tiles {
            assert_eq!(first, next, "{mc} rows: {tiles:?}");
            assert!((1..=6).contains(&rows), "{mc} rows: {tiles:?}");
            assert!(mc < 6 || rows >= 3, "{mc} rows: {tiles:?}");
            next += rows;
        }
        assert_eq!(next, mc, "{mc} rows: {tiles:?}");
        assert_eq!(tiles.len(), mc.div_ceil(6), "{mc} rows: {tiles:?}");
    }
}

/// Whole products and column panels (as `gemm_run` cuts them, at multiples of 16), ragged in
/// every dimension (rows not a multiple of 6 or of a row block, columns not of 16, depth not
/// of 256), against row-major and transposed weights, overwriting and accumulating.
#[test]
fn packed_products_match_an_f64_reference() {
    if !avx2() {
        return;
    }
    for &(m, k, n) in &[
        (1, 1, 1),
        (3, 20, 33),
        (6, 16, 16),
        (7, 300, 17),
        (9, 40, 16),
        (10, 33, 31),
        (11, 8, 48),
        (128, 257, 100),
        (200, 64, 48),
        (13, 520, 70),
    ] {
        for wt in [false, true] {
            let a = data(m * k, 1);
            let w = data(k * n, 2);
            let want = reference(&a, &w, (m, k, n), wt);
            let slot = PackedSlot::default();
            // SAFETY: the view addresses the k x n weight.
            let packed = unsafe { slot.get(weight_view(&w, k, n, wt), k, n) };
            let av = View {
                ptr: a.as_ptr(),
                rs: k as isize,
                cs: 1,
            };
            let tol = 1e-6 * (k as f64).sqrt();
            for accumulate in [false, true] {
                let init = data(m * n, 3);
                let mut got = init.clone();
                // Two column panels, split at a multiple of 16, when there are more than 16
                // columns.
                let panels = if n > 16 {
                    let split = 16 * (n / 32).max(1);
                    vec![(0, split), (split, n)]
                } else {
                    vec![(0, n)]
                };
                for (c0, c1) in panels {
                    // SAFETY: `a` holds m x k, the packing k x n, `got` m rows of n.
                    unsafe {
                        crate::prepack::gemm(
                            (m, c1 - c0, k),
                            av,
                            packed.cols().from(c0),
                            got.as_mut_ptr().add(c0),
                            n as isize,
                            accumulate,
                        )
                    };
                }
                let want: Vec<f64> = want
                    .iter()
                    .zip(&init)
                    .map(|(&x, &i)| if accumulate { x + i as f64 } else { x })
                    .collect();
                let what = format!("{m}x{k}x{n} transposed {wt} accumulate {accumulate}");
                assert_close(&got, &want, tol, tol, &what);
            }
        }
    }
}

/// The packing is kept while the weight's view and values are the same, and made again when
/// the weight moves or is rewritten in place.
#[test]
fn a_packing_is_kept_until_the_weight_changes() {
    let (k, n) = (96, 80);
    let mut w = data(k * n, 4);
    let slot = PackedSlot::default();
    assert!(!slot.is_packed());
    // SAFETY (every `get`): the views address k x n weights.
    let first = unsafe { slot.get(weight_view(&w, k, n, false), k, n) };
    assert!(slot.is_packed());
    let again = unsafe { slot.get(weight_view(&w, k, n, false), k, n) };
    assert!(
        Arc::ptr_eq(&first, &again),
        "an unchanged weight was packed again"
    );
    let moved = w.clone();
    let other = unsafe { slot.get(weight_view(&moved, k, n, false), k, n) };
    assert!(
        !Arc::ptr_eq(&first, &other),
        "a weight at another address kept the packing"
    );
    for x in w.iter_mut() {
        *x = -*x - 0.5;
    }
    let back = unsafe { slot.get(weight_view(&w, k, n, false), k, n) };
    let rewritten = unsafe { slot.get(weight_view(&w, k, n, false), k, n) };
    assert!(Arc::ptr_eq(&back, &rewritten));
    assert!(
        !Arc::ptr_eq(&first, &back),
        "a rewritten weight kept its old packing"
    );
}

/// A run packs the weight only when the run before saw the same one: a weight used once is
/// never packed, and one that changes on every run (a caller breaking the promise) is not
/// packed again and again.
#[test]
fn a_weight_is_packed_on_its_second_run() {
    let (k, n) = (96, 80);
    let mut w = data(k * n, 8);
    let slot = PackedSlot::default();
    // SAFETY (every `for_run`): the views address k x n weights.
    let run =
        |slot: &PackedSlot, w: &[f32]| unsafe { slot.for_run(weight_view(w, k, n, false), k, n) };
    assert!(run(&slot, &w).is_none(), "packed on the first run");
    assert!(!slot.is_packed());
    let second = run(&slot, &w).expect("packed on the second run");
    let third = run(&slot, &w).expect("kept for the third run");
    assert!(
        Arc::ptr_eq(&second, &third),
        "an unchanged weight was packed again"
    );
    for (round, scale) in [-1.0f32, 3.0, 0.5].into_iter().enumerate() {
        for x in w.iter_mut() {
            *x *= scale;
        }
        assert!(
            run(&slot, &w).is_none(),
            "change {round}: a rewritten weight ran on a packing"
        );
        assert!(
            !slot.is_packed(),
            "change {round}: the stale packing was kept"
        );
    }
    let again = run(&slot, &w).expect("packed once the weight stayed the same");
    assert!(!Arc::ptr_eq(&second, &again));
}

/// `x[2, 64, 96] @ w[96, 80] + bias` (the weight broadcast over the batch) compiled with `w`
/// static runs its product on the kept packing from its second run (the region's stage holds
/// one), and gives the f64 reference's values on every run, when the weight is rewritten in
/// place too (the run after the rewrite packs per call, the next one packs it again).
#[test]
fn a_region_with_a_static_weight_keeps_it_packed() {
    let (b, m, k, n) = (2usize, 64usize, 96usize, 80usize);
    let mut t = Tb::default();
    let f32c = DTypeCode::F32;
    let x = t.value(f32c, &[b as i64, m as i64, k as i64]);
    let w = t.value(f32c, &[k as i64, n as i64]);
    let bias = t.value(f32c, &[n as i64]);
    // The weight broadcast over the batch, as a traced `x @ w` reads it.
    let wb = t.op(
        "broadcast_in_dim",
        vec![
            ArgView::Value(w),
            super::ints(&[b as i64, k as i64, n as i64]),
            super::ints(&[1, 2]),
        ],
        f32c,
        &[b as i64, k as i64, n as i64],
    );
    let y = t.op(
        "matmul",
        vec![ArgView::Value(x), ArgView::Value(wb)],
        f32c,
        &[b as i64, m as i64, n as i64],
    );
    let bb = t.op(
        "broadcast_in_dim",
        vec![
            ArgView::Value(bias),
            super::ints(&[b as i64, m as i64, n as i64]),
            super::ints(&[2]),
        ],
        f32c,
        &[b as i64, m as i64, n as i64],
    );
    let out = t.op(
        "add",
        vec![ArgView::Value(y), ArgView::Value(bb)],
        f32c,
        &[b as i64, m as i64, n as i64],
    );
    let view = t.view(&[x, w, bias], &[out]);
    let spec = RegionSpec {
        ops: (0..4).collect(),
        inputs: vec![x, w, bias].into(),
        outputs: vec![out].into(),
    };
    let region = Region::compile(&view, &spec, services(), &[1]).expect("compile");
    let xs = data(b * m * k, 5);
    let mut ws = data(k * n, 6);
    let bs = data(n, 7);
    let on = usize::from(crate::prepack::enabled());
    for (round, packed_after) in [0, on, 0, on].into_iter().enumerate() {
        if round == 2 {
            for v in ws.iter_mut() {
                *v *= -2.0;
            }
        }
        let mut got = vec![f32::NAN; b * m * n];
        let (xshape, wshape, bshape) = (
            [b as i64, m as i64, k as i64],
            [k as i64, n as i64],
            [n as i64],
        );
        let oshape = [b as i64, m as i64, n as i64];
        let ins = [
            super::f32_desc(xs.as_ptr(), &xshape),
            super::f32_desc(ws.as_ptr(), &wshape),
            super::f32_desc(bs.as_ptr(), &bshape),
        ];
        let outs = [super::f32_desc(got.as_mut_ptr(), &oshape)];
        region.run(&ins, &outs, &ExecContext::CPU).expect("run");
        let mut want = reference(&xs, &ws, (b * m, k, n), false);
        for (i, v) in want.iter_mut().enumerate() {
            *v += bs[i % n] as f64;
        }
        assert_close(&got, &want, 1e-5, 1e-5, &format!("round {round}"));
        assert_eq!(
            region.packed_products(),
            packed_after,
            "round {round}: products running on a kept packing"
        );
    }
    // Compiled without the promise, the product packs nothing.
    let plain = Region::compile(&view, &spec, services(), &[]).expect("compile");
    assert_eq!(plain.packed_products(), 0);
}

/// Threaded products (as a GEMM stage runs them) on a kept packing against the same products
/// packing both operands per call (`matrixmultiply` on AVX2), alternating in one process;
/// ignored by default: `cargo test --release -p thunder-cpu-simd --lib prepack_bench --
/// --ignored --nocapture` (`RAYON_NUM_THREADS` sets the threads).
#[test]
#[ignore = "a benchmark: run it by name with --ignored --nocapture"]
fn prepack_bench() {
    use crate::gemm_run::Product;
    if !crate::prepack::enabled() {
        eprintln!("prepack is off on this CPU");
        return;
    }
    // GPT-2 small over 128 and 1024 tokens, MiniLM's (B8 S128, hidden 384), the LM head.
    for &(m, k, n) in &[
        (128, 768, 2304),
        (128, 768, 3072),
        (128, 3072, 768),
        (1024, 384, 384),
        (1024, 384, 1536),
        (1024, 1536, 384),
        (1024, 768, 3072),
        (128, 768, 50257),
    ] {
        let a = data(m * k, 1);
        let w = data(k * n, 2);
        let mut c = vec![0f32; m * n];
        let slot = PackedSlot::default();
        let wv = weight_view(&w, k, n, false);
        let reps = ((2e9 / (2 * m * n * k) as f64).ceil() as usize).max(2);
        let mut time = |packed: bool| {
            let start = std::time::Instant::now();
            for _ in 0..reps {
                // SAFETY: the vectors hold the operands and the output.
                unsafe {
                    let kept = packed.then(|| slot.get(wv, k, n));
                    Product {
                        m,
                        n,
                        k,
                        a: View {
                            ptr: a.as_ptr(),
                            rs: k as isize,
                            cs: 1,
                        },
                        b: wv,
                        dst: c.as_mut_ptr(),
                        ld: n as isize,
                        read_dst: false,
                        packed: kept.as_ref().map(|p| p.cols()),
                    }
                    .run(None)
                }
            }
            (2 * m * n * k * reps) as f64 / start.elapsed().as_secs_f64() / 1e9
        };
        let (mut on, mut off) = (Vec::new(), Vec::new());
        for _ in 0..7 {
            on.push(time(true));
            off.push(time(false));
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let ratios: Vec<String> = on
            .iter()
            .zip(&off)
            .map(|(a, b)| format!("{:.2}", a / b))
            .collect();
        eprintln!(
            "{m}x{k}x{n}: kept packing {:.1} GFLOP/s, packed per call {:.1} (rounds: {})",
            median(&mut on),
            median(&mut off),
            ratios.join(" ")
        );
    }
}
