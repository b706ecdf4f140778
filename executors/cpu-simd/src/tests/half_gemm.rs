//! bf16 and f16 products (`half_gemm.rs`) against exact sums: the operands are small
//! integers and halves, so every product and every partial sum is exact in f32 and the one
//! rounding to the output type is the whole error; the reference rounds the exact sum once.
//! Covered: plain, batched, empty (`m`, `n` or `k` of 0), a transposed weight read as a
//! view, a product of a product (scratch), a transpose that is itself an output, and how
//! claims split half-type products from the f32 work beside them.

use super::{ints, services, Tb};
use crate::half_gemm::HalfRegion;
use crate::CpuSimd;
use half::{bf16, f16};
use std::ffi::c_void;
use thunder_abi::export::{CompiledRegion, Executor};
use thunder_abi::{ArgView, DTypeCode, DeviceDesc, ExecContext, RegionSpec, TensorDesc};

fn v(id: u32) -> ArgView {
    ArgView::Value(id)
}

fn to_bits(dtype: DTypeCode, x: f32) -> u16 {
    match dtype {
        DTypeCode::BF16 => bf16::from_f32(x).to_bits(),
        _ => f16::from_f32(x).to_bits(),
    }
}

fn from_bits(dtype: DTypeCode, b: u16) -> f32 {
    match dtype {
        DTypeCode::BF16 => bf16::from_bits(b).to_f32(),
        _ => f16::from_bits(b).to_f32(),
    }
}

/// Values in {-2, -1.5, ..., 2}: exact in both half types.
fn halves(n: usize, seed: u64) -> Vec<f32> {
    super::data(n, seed)
        .iter()
        .map(|x| ((x * 4.0).round() / 2.0).clamp(-2.0, 2.0))
        .collect()
}

/// Compiles every op of `t` as one half-type region and runs it on values of `dtype`.
fn run(t: &Tb, dtype: DTypeCode, inputs: &[(u32, Vec<f32>)], outputs: &[u32]) -> Vec<Vec<f32>> {
    let raw: Vec<(u32, Vec<u8>)> = inputs
        .iter()
        .map(|(id, x)| {
            let bits: Vec<u16> = x.iter().map(|&x| to_bits(dtype, x)).collect();
            (*id, u16_bytes(&bits))
        })
        .collect();
    run_raw(t, &raw, outputs)
        .iter()
        .map(|o| {
            o.chunks_exact(2)
                .map(|c| from_bits(dtype, u16::from_le_bytes([c[0], c[1]])))
                .collect()
        })
        .collect()
}

/// `a @ b` for `[batch, m, k] @ [batch, k, n]`, each sum exact, rounded once.
fn reference(
    dtype: DTypeCode,
    a: &[f32],
    b: &[f32],
    (batch, m, k, n): (usize, usize, usize, usize),
) -> Vec<f32> {
    let mut out = Vec::with_capacity(batch * m * n);
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let s: f64 = (0..k)
                    .map(|p| a[bi * m * k + i * k + p] as f64 * b[bi * k * n + p * n + j] as f64)
                    .fold(0.0, |s, x| s + x);
                out.push(from_bits(dtype, to_bits(dtype, s as f32)));
            }
        }
    }
    out
}

fn check(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        // Values, not bits: a lone -0 product may keep its sign (the `gemm` crate's does).
        assert_eq!(g, w, "{what}: element {i}: got {g}, want {w}");
    }
}

const TYPES: [DTypeCode; 2] = [DTypeCode::BF16, DTypeCode::F16];

#[test]
fn half_products_round_the_exact_sum_once() {
    for dtype in TYPES {
        for &(batch, m, k, n) in &[
            (&[][..], 7usize, 300usize, 129usize),
            (&[2, 3][..], 5, 9, 17),
            (&[][..], 0, 4, 3),
            (&[][..], 3, 0, 4),
            (&[][..], 3, 4, 0),
            (&[][..], 64, 256, 64),
            // Odd depths, whole and ragged column blocks.
            (&[][..], 5, 33, 70),
            (&[2][..], 13, 1, 64),
            // Deep enough that the rows come in several groups: every block packed once and
            // shared (bf16 on AVX-512-BF16).
            (&[][..], 400, 3000, 70),
            // Whole 32 x 32 tiles (bf16 on AMX, where the CPU has it) beside rows and columns
            // left over (the AVX-512-BF16 kernel), a depth of whole 32-element steps.
            (&[][..], 70, 96, 130),
            (&[2][..], 64, 1024, 128),
            (&[][..], 33, 32, 64),
        ] {
            let mut t = Tb::default();
            let dims = |x: usize, y: usize| {
                let mut s: Vec<i64> = batch.iter().map(|&d| d as i64).collect();
                s.extend([x as i64, y as i64]);
                s
            };
            let a = t.value(dtype, &dims(m, k));
            let b = t.value(dtype, &dims(k, n));
            let c = t.op("matmul", vec![v(a), v(b)], dtype, &dims(m, n));
            let bn: usize = batch.iter().product();
            let (xa, xb) = (halves(bn * m * k, 1), halves(bn * k * n, 2));
            let got = run(&t, dtype, &[(a, xa.clone()), (b, xb.clone())], &[c]);
            let what = format!("{dtype:?} batch {batch:?} m {m} k {k} n {n}");
            check(&got[0], &reference(dtype, &xa, &xb, (bn, m, k, n)), &what);
        }
    }
}

#[test]
fn transposes_are_read_as_views_and_products_chain() {
    for dtype in TYPES {
        // y = (x @ wᵀ) @ u, with wᵀ also an output (copied out of its view).
        let (m, k, n, p) = (6usize, 40usize, 24usize, 5usize);
        let mut t = Tb::default();
        let x = t.value(dtype, &[m as i64, k as i64]);
        let w = t.value(dtype, &[n as i64, k as i64]);
        let u = t.value(dtype, &[n as i64, p as i64]);
        let wt = t.op(
            "transpose",
            vec![v(w), ints(&[1, 0])],
            dtype,
            &[k as i64, n as i64],
        );
        let h = t.op("matmul", vec![v(x), v(wt)], dtype, &[m as i64, n as i64]);
        let y = t.op("matmul", vec![v(h), v(u)], dtype, &[m as i64, p as i64]);
        let (xx, xw, xu) = (halves(m * k, 3), halves(n * k, 4), halves(n * p, 5));
        let got = run(
            &t,
            dtype,
            &[(x, xx.clone()), (w, xw.clone()), (u, xu.clone())],
            &[y, wt],
        );
        let wt_want: Vec<f32> = (0..k)
            .flat_map(|r| (0..n).map(move |c| (r, c)))
            .map(|(r, c)| xw[c * k + r])
            .collect();
        check(&got[1], &wt_want, &format!("{dtype:?} transposed weight"));
        let h_want = reference(dtype, &xx, &wt_want, (1, m, k, n));
        check(
            &got[0],
            &reference(dtype, &h_want, &xu, (1, m, n, p)),
            &format!("{dtype:?} chain"),
        );
    }
}

#[test]
fn transposed_left_operands_and_transposed_outputs() {
    // y = gᵀ @ x (a weight gradient's shape), with gᵀ also an output: the product reads a
    // left operand whose rows are not contiguous (bf16: transposed into a buffer first) and
    // the output is a blocked copy of a transposed view (over the threads for the largest).
    for dtype in TYPES {
        for &(batch, m, k, n) in &[
            (&[][..], 37usize, 21usize, 70usize),
            (&[2][..], 19, 33, 17),
            (&[][..], 300, 8, 16),
            (&[][..], 260, 300, 16),
        ] {
            let mut t = Tb::default();
            let dims = |x: usize, y: usize| {
                let mut s: Vec<i64> = batch.iter().map(|&d| d as i64).collect();
                s.extend([x as i64, y as i64]);
                s
            };
            let r = batch.len() as i64 + 2;
            let mut perm: Vec<i64> = (0..r).collect();
            perm.swap(r as usize - 2, r as usize - 1);
            let g = t.value(dtype, &dims(k, m));
            let x = t.value(dtype, &dims(k, n));
            let gt = t.op("transpose", vec![v(g), ints(&perm)], dtype, &dims(m, k));
            let y = t.op("matmul", vec![v(gt), v(x)], dtype, &dims(m, n));
            let bn: usize = batch.iter().product();
            let (xg, xx) = (halves(bn * k * m, 6), halves(bn * k * n, 7));
            let got = run(&t, dtype, &[(g, xg.clone()), (x, xx.clone())], &[y, gt]);
            let gt_want: Vec<f32> = (0..bn)
                .flat_map(|b| (0..m).flat_map(move |i| (0..k).map(move |p| (b, i, p))))
                .map(|(b, i, p)| xg[b * k * m + p * m + i])
                .collect();
            let what = format!("{dtype:?} batch {batch:?} m {m} k {k} n {n}");
            check(&got[1], &gt_want, &format!("{what}: gᵀ"));
            let want = reference(dtype, &gt_want, &xx, (bn, m, k, n));
            check(&got[0], &want, &format!("{what}: gᵀ @ x"));
        }
    }
}

/// `x` summed over `dims` in f64 (exact for these values), rounded once through f32 (exact
/// for these sums) to `dtype`.
fn sum_reference(dtype: DTypeCode, x: &[f32], shape: &[usize], dims: &[usize]) -> Vec<f32> {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    let out_n: usize = kept.iter().map(|&d| shape[d]).product();
    let mut acc = vec![0f64; out_n];
    for (i, &v) in x.iter().enumerate() {
        let (mut rem, mut o, mut step) = (i, 0, 1);
        for d in (0..shape.len()).rev() {
            let at = rem % shape[d];
            rem /= shape[d];
            if !dims.contains(&d) {
                o += at * step;
                step *= shape[d];
            }
        }
        acc[o] += v as f64;
    }
    acc.iter()
        .map(|&s| from_bits(dtype, to_bits(dtype, s as f32)))
        .collect()
}

#[test]
fn half_sums_round_the_f64_sum_once() {
    for dtype in TYPES {
        for (shape, dims) in [
            (vec![37usize, 70usize], vec![0usize]),
            (vec![37, 70], vec![1]),
            (vec![2, 3, 40], vec![0, 2]),
            (vec![2, 3, 40], vec![1]),
            (vec![4, 5], vec![]),
            (vec![], vec![]),
            (vec![6], vec![0]),
            (vec![0, 5], vec![0]),
            (vec![5, 0], vec![1]),
            // Over the threads: columns split, every row added in order.
            (vec![600, 300], vec![0]),
        ] {
            let mut t = Tb::default();
            let sh: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            let kept: Vec<i64> = (0..shape.len())
                .filter(|d| !dims.contains(d))
                .map(|d| shape[d] as i64)
                .collect();
            let a = t.value(dtype, &sh);
            let dl: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            let y = t.op("sum", vec![v(a), ints(&dl)], dtype, &kept);
            let xa = halves(shape.iter().product(), 8);
            let got = run(&t, dtype, &[(a, xa.clone())], &[y]);
            let what = format!("{dtype:?} sum of {shape:?} over {dims:?}");
            check(&got[0], &sum_reference(dtype, &xa, &shape, &dims), &what);
        }
        // A transposed view, summed over its rows.
        let mut t = Tb::default();
        let a = t.value(dtype, &[9, 33]);
        let at = t.op("transpose", vec![v(a), ints(&[1, 0])], dtype, &[33, 9]);
        let y = t.op("sum", vec![v(at), ints(&[0])], dtype, &[9]);
        let xa = halves(9 * 33, 9);
        let xt: Vec<f32> = (0..33)
            .flat_map(|r| (0..9).map(move |c| (r, c)))
            .map(|(r, c)| xa[c * 33 + r])
            .collect();
        let got = run(&t, dtype, &[(a, xa)], &[y]);
        check(
            &got[0],
            &sum_reference(dtype, &xt, &[33, 9], &[0]),
            &format!("{dtype:?} transposed"),
        );
    }
}

#[test]
fn a_half_sum_just_above_a_tie_rounds_up() {
    // 1 + ulp/2 + tiny: rounding the f64 sum through f32 first (where the tiny part is lost)
    // would land on the tie and round down to 1.
    for (dtype, tiny, want) in [
        (DTypeCode::BF16, 2f32.powi(-40), 1.0 + 2f32.powi(-7)),
        (DTypeCode::F16, 2f32.powi(-24), 1.0 + 2f32.powi(-10)),
    ] {
        let half_ulp = if dtype == DTypeCode::BF16 {
            2f32.powi(-8)
        } else {
            2f32.powi(-11)
        };
        let mut t = Tb::default();
        let a = t.value(dtype, &[3]);
        let y = t.op("sum", vec![v(a), ints(&[0])], dtype, &[]);
        let got = run(&t, dtype, &[(a, vec![1.0, half_ulp, tiny])], &[y]);
        assert_eq!(got[0], vec![want], "{dtype:?}");
    }
}

#[test]
fn a_transposed_product_output_is_the_swapped_product() {
    // dw = (xᵀ @ g)ᵀ, a linear's weight gradient: computed as gᵀ @ x into the output; and
    // the same with the product also an output (then it is copied, not swapped).
    for dtype in TYPES {
        for (rows, c_in, c_out, keep_product) in [
            (40usize, 24usize, 70usize, false),
            (300, 200, 90, false),
            (40, 24, 70, true),
        ] {
            let mut t = Tb::default();
            let x = t.value(dtype, &[rows as i64, c_in as i64]);
            let g = t.value(dtype, &[rows as i64, c_out as i64]);
            let xt = t.op(
                "transpose",
                vec![v(x), ints(&[1, 0])],
                dtype,
                &[c_in as i64, rows as i64],
            );
            let p = t.op(
                "matmul",
                vec![v(xt), v(g)],
                dtype,
                &[c_in as i64, c_out as i64],
            );
            let dw = t.op(
                "transpose",
                vec![v(p), ints(&[1, 0])],
                dtype,
                &[c_out as i64, c_in as i64],
            );
            let (xx, xg) = (halves(rows * c_in, 10), halves(rows * c_out, 11));
            let outs = if keep_product { vec![dw, p] } else { vec![dw] };
            let got = run(&t, dtype, &[(x, xx.clone()), (g, xg.clone())], &outs);
            // dw[o][i] = Σ_r g[r][o] x[r][i]: gᵀ @ x.
            let gt: Vec<f32> = (0..c_out)
                .flat_map(|o| (0..rows).map(move |r| (o, r)))
                .map(|(o, r)| xg[r * c_out + o])
                .collect();
            let what = format!("{dtype:?} {rows}x{c_in}x{c_out} keep {keep_product}");
            let want = reference(dtype, &gt, &xx, (1, c_out, rows, c_in));
            check(&got[0], &want, &what);
            if keep_product {
                let pt: Vec<f32> = (0..c_in)
                    .flat_map(|i| (0..c_out).map(move |o| (i, o)))
                    .map(|(i, o)| want[o * c_in + i])
                    .collect();
                check(&got[1], &pt, &format!("{what}: the product"));
            }
        }
    }
}

#[test]
fn claims_keep_half_products_in_regions_of_their_own() {
    // f32 add, then a bf16 product, then an f32 multiply: three regions (each claimed run
    // compiles), and the f32 work never lands in the half-type region.
    let mut t = Tb::default();
    let a = t.value(DTypeCode::F32, &[4, 4]);
    let s = t.op("add", vec![v(a), v(a)], DTypeCode::F32, &[4, 4]);
    let x = t.value(DTypeCode::BF16, &[4, 8]);
    let w = t.value(DTypeCode::BF16, &[8, 8]);
    let wt = t.op(
        "transpose",
        vec![v(w), ints(&[1, 0])],
        DTypeCode::BF16,
        &[8, 8],
    );
    let y = t.op("matmul", vec![v(x), v(wt)], DTypeCode::BF16, &[4, 8]);
    let z = t.op("mul", vec![v(s), v(s)], DTypeCode::F32, &[4, 4]);
    let view = t.view(&[a, x, w], &[y, z]);
    let exec = CpuSimd::create(services(), &[]).expect("create");
    let regions = exec.claim(&view).expect("claim");
    assert_eq!(regions, vec![vec![0], vec![1, 2], vec![3]]);
    // An f16 matmul with a bf16 operand is nobody's half product.
    let mut t = Tb::default();
    let a = t.value(DTypeCode::F16, &[2, 2]);
    let b = t.value(DTypeCode::BF16, &[2, 2]);
    t.op("matmul", vec![v(a), v(b)], DTypeCode::F16, &[2, 2]);
    let view = t.view(&[a, b], &[2]);
    assert!(exec.claim(&view).expect("claim").is_empty());
}

#[test]
fn a_tensor_of_the_wrong_type_is_an_error_not_a_crash() {
    let mut t = Tb::default();
    let a = t.value(DTypeCode::BF16, &[2, 3]);
    let b = t.value(DTypeCode::BF16, &[3, 2]);
    let c = t.op("matmul", vec![v(a), v(b)], DTypeCode::BF16, &[2, 2]);
    let view = t.view(&[a, b], &[c]);
    let spec = RegionSpec {
        ops: vec![0].into(),
        inputs: vec![a, b].into(),
        outputs: vec![c].into(),
    };
    let region = HalfRegion::compile(&view, &spec).expect("compile");
    let mut data = vec![0f32; 6];
    let mut out = vec![0u16; 4];
    let desc = |p: *mut c_void, dtype, s: &'static [i64]| TensorDesc {
        data: p,
        byte_offset: 0,
        device: DeviceDesc::CPU,
        dtype,
        shape: s.into(),
        strides: (&[][..]).into(),
    };
    let ins = [
        desc(data.as_mut_ptr() as *mut c_void, DTypeCode::F32, &[2, 3]),
        desc(data.as_mut_ptr() as *mut c_void, DTypeCode::F32, &[3, 2]),
    ];
    let outs = [desc(
        out.as_mut_ptr() as *mut c_void,
        DTypeCode::BF16,
        &[2, 2],
    )];
    let err = region
        .run(&ins, &outs, &ExecContext::CPU)
        .expect_err("an f32 input for a bf16 product");
    assert!(
        err.to_string().contains("expected a CPU bf16[2, 3]"),
        "{err}"
    );
}

/// Runs a region whose inputs and outputs have their own dtypes (raw element bits).
fn run_raw(t: &Tb, inputs: &[(u32, Vec<u8>)], outputs: &[u32]) -> Vec<Vec<u8>> {
    let ids: Vec<u32> = inputs.iter().map(|(id, _)| *id).collect();
    let view = t.view(&ids, outputs);
    let spec = RegionSpec {
        ops: (0..view.ops.len() as u32).collect(),
        inputs: ids.into(),
        outputs: outputs.to_vec().into(),
    };
    let region = HalfRegion::compile(&view, &spec).expect("compile");
    let meta = |id: u32| {
        let m = &view.values[id as usize];
        (m.shape.to_vec(), m.dtype)
    };
    let size = |d: DTypeCode| if d == DTypeCode::F32 { 4 } else { 2 };
    // u32 storage keeps every buffer aligned for f32.
    let mut ins: Vec<Vec<u32>> = inputs
        .iter()
        .map(|(_, b)| {
            let mut v = vec![0u32; b.len().div_ceil(4)];
            // SAFETY: `v` holds at least `b.len()` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr() as *mut u8, b.len())
            };
            v
        })
        .collect();
    let mut outs: Vec<Vec<u32>> = outputs
        .iter()
        .map(|&o| {
            let (s, d) = meta(o);
            // NaN in f32, bf16 and f16 alike: an element the region leaves unwritten shows.
            vec![0x7fff_7fffu32; (s.iter().product::<i64>() as usize * size(d)).div_ceil(4)]
        })
        .collect();
    let metas_in: Vec<_> = inputs.iter().map(|(id, _)| meta(*id)).collect();
    let metas_out: Vec<_> = outputs.iter().map(|&o| meta(o)).collect();
    fn desc(p: *mut u32, (s, d): &(Vec<i64>, DTypeCode)) -> TensorDesc<'_> {
        TensorDesc {
            data: p as *mut c_void,
            byte_offset: 0,
            device: DeviceDesc::CPU,
            dtype: *d,
            shape: s.as_slice().into(),
            strides: (&[][..]).into(),
        }
    }
    let ind: Vec<_> = ins
        .iter_mut()
        .zip(&metas_in)
        .map(|(v, m)| desc(v.as_mut_ptr(), m))
        .collect();
    let outd: Vec<_> = outs
        .iter_mut()
        .zip(&metas_out)
        .map(|(v, m)| desc(v.as_mut_ptr(), m))
        .collect();
    region.run(&ind, &outd, &ExecContext::CPU).expect("run");
    outs.iter()
        .zip(&metas_out)
        .map(|(v, (s, d))| {
            let n = s.iter().product::<i64>() as usize * size(*d);
            // SAFETY: `v` holds at least `n` bytes.
            unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, n) }.to_vec()
        })
        .collect()
}

fn f32_bytes(x: &[f32]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn u16_bytes(x: &[u16]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn converts_round_to_nearest_even_and_broadcasts_are_views() {
    // Ties, values just off ties, extremes, subnormals of both types, NaN and infinities.
    let mut xs: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        65504.0,
        65520.0,
        1e-8,
        -3e-39,
        1e38,
        3.4e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        6.1e-5,
        5.9e-8,
    ];
    for bits in [
        0x3f80_8000u32,
        0x3f81_8000,
        0x3f80_8001,
        0x3f80_7fff,
        0x3f80_1000,
    ] {
        xs.push(f32::from_bits(bits));
    }
    xs.extend(super::data(100, 9).iter().map(|x| x * 1000.0));
    let n = xs.len() as i64;
    for dtype in TYPES {
        // f32 -> half, then back; and a broadcast half row widened to a [3, n] f32.
        let mut t = Tb::default();
        let x = t.value(DTypeCode::F32, &[n]);
        let h = t.op(
            "convert_element_type",
            vec![v(x), ArgView::DType(dtype)],
            dtype,
            &[n],
        );
        let hb = t.op(
            "broadcast_in_dim",
            vec![v(h), ints(&[3, n]), ints(&[1])],
            dtype,
            &[3, n],
        );
        let back = t.op(
            "convert_element_type",
            vec![v(hb), ArgView::DType(DTypeCode::F32)],
            DTypeCode::F32,
            &[3, n],
        );
        let got = run_raw(&t, &[(x, f32_bytes(&xs))], &[h, back]);
        let want_h: Vec<u16> = xs.iter().map(|&x| to_bits(dtype, x)).collect();
        assert_eq!(got[0], u16_bytes(&want_h), "{dtype:?}: f32 -> half bits");
        let want_back: Vec<f32> = (0..3)
            .flat_map(|_| want_h.iter().map(|&b| from_bits(dtype, b)))
            .collect();
        let got_back: Vec<u32> = got[1]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let want_back: Vec<u32> = want_back.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got_back, want_back, "{dtype:?}: broadcast half -> f32 bits");
    }
}

#[test]
fn half_converts_are_claimed_beside_products_but_f32_converts_are_not() {
    let exec = CpuSimd::create(services(), &[]).expect("create");
    let mut t = Tb::default();
    let x = t.value(DTypeCode::BF16, &[4, 8]);
    let w = t.value(DTypeCode::BF16, &[8, 8]);
    let y = t.op("matmul", vec![v(x), v(w)], DTypeCode::BF16, &[4, 8]);
    let y32 = t.op(
        "convert_element_type",
        vec![v(y), ArgView::DType(DTypeCode::F32)],
        DTypeCode::F32,
        &[4, 8],
    );
    let z = t.op("tanh", vec![v(y32)], DTypeCode::F32, &[4, 8]);
    let z64 = t.op(
        "convert_element_type",
        vec![v(z), ArgView::DType(DTypeCode::F64)],
        DTypeCode::F64,
        &[4, 8],
    );
    let view = t.view(&[x, w], &[z64]);
    // The product and its convert in a half region; tanh and the f32 -> f64 convert in an
    // f32 region.
    assert_eq!(
        exec.claim(&view).expect("claim"),
        vec![vec![0, 1], vec![2, 3]]
    );
}

/// AMX's tiles against the exact sum, called directly (the products above reach them through
/// `bf16_gemm` only where the CPU has AMX). Where it has none this says so and checks nothing;
/// `THUNDER_REQUIRE_AMX=1` (the device check, `scripts/gpu/amx_check.sh`) makes that a failure.
#[cfg(target_arch = "x86_64")]
#[test]
fn amx_tiles_sum_exactly_where_the_cpu_has_them() {
    if !crate::amx::available() {
        assert_ne!(
            std::env::var("THUNDER_REQUIRE_AMX").as_deref(),
            Ok("1"),
            "THUNDER_REQUIRE_AMX=1 but this CPU or OS gives no AMX"
        );
        eprintln!("amx_tiles_sum_exactly_where_the_cpu_has_them: no AMX here, nothing checked");
        return;
    }
    let (m, k, n) = (32usize, 96usize, 64usize);
    let (xa, xb) = (halves(m * k, 3), halves(k * n, 4));
    let bits = |x: &[f32]| -> Vec<u16> { x.iter().map(|&v| to_bits(DTypeCode::BF16, v)).collect() };
    let (a, b) = (bits(&xa), bits(&xb));
    // The packed block: depth pairs side by side, 64 columns a row.
    let mut packed = vec![0u32; k / 2 * crate::bf16_gemm::NB];
    for pp in 0..k / 2 {
        for j in 0..n {
            packed[pp * crate::bf16_gemm::NB + j] =
                u32::from(b[2 * pp * n + j]) | u32::from(b[(2 * pp + 1) * n + j]) << 16;
        }
    }
    let mut out = vec![0u16; m * n];
    // SAFETY: AMX is available; each call reads 32 rows of k, the packed rows, and writes a
    // 32 x 32 tile inside `out`.
    unsafe {
        crate::amx::configure();
        for half in 0..2 {
            crate::amx::tile_32x32(
                a.as_ptr(),
                k,
                packed.as_ptr().add(32 * half),
                k,
                out.as_mut_ptr().add(32 * half),
                n,
            );
        }
        crate::amx::release();
    }
    let got: Vec<f32> = out.iter().map(|&h| from_bits(DTypeCode::BF16, h)).collect();
    check(
        &got,
        &reference(DTypeCode::BF16, &xa, &xb, (1, m, k, n)),
        "AMX 32 x 96 @ 96 x 64",
    );
}

#[test]
fn broadcasts_along_the_last_dim_fill_their_rows() {
    // A half scalar broadcast to [3, 5] and copied out as it is; a half column [4]
    // broadcast to [4, 70] (the last dim a broadcast, stride 0) and widened to f32. Rows of
    // one element, of a few and of more than a doubling run's first copies.
    let col = [1.5f32, -0.0, f32::INFINITY, -3.25e-3];
    for dtype in TYPES {
        let mut t = Tb::default();
        let s = t.value(dtype, &[]);
        let sb = t.op(
            "broadcast_in_dim",
            vec![v(s), ints(&[3, 5]), ints(&[])],
            dtype,
            &[3, 5],
        );
        let c = t.value(dtype, &[4]);
        let cb = t.op(
            "broadcast_in_dim",
            vec![v(c), ints(&[4, 70]), ints(&[0])],
            dtype,
            &[4, 70],
        );
        let wide = t.op(
            "convert_element_type",
            vec![v(cb), ArgView::DType(DTypeCode::F32)],
            DTypeCode::F32,
            &[4, 70],
        );
        let s_bits = to_bits(dtype, -2.75);
        let c_bits: Vec<u16> = col.iter().map(|&x| to_bits(dtype, x)).collect();
        let got = run_raw(
            &t,
            &[(s, u16_bytes(&[s_bits])), (c, u16_bytes(&c_bits))],
            &[sb, wide],
        );
        assert_eq!(
            got[0],
            u16_bytes(&[s_bits; 15]),
            "{dtype:?}: scalar broadcast"
        );
        let want: Vec<f32> = c_bits
            .iter()
            .flat_map(|&b| std::iter::repeat_n(from_bits(dtype, b), 70))
            .collect();
        assert_eq!(
            got[1],
            f32_bytes(&want),
            "{dtype:?}: column broadcast widened"
        );
    }
}
