//! The elementwise groups of the ONNX transformers, each compiled once as a region and run
//! repeatedly, timed in CPU time of the whole process: BERT's bias + erf-GELU on [1024, 1536],
//! GPT-2's bias + tanh-GELU on [128, 3072] and a 4x `tanh(x * 1.01 + 0.1)` chain on 2^15
//! (in L2) and 2^22 elements. Ignored by default; run with
//! `RAYON_NUM_THREADS=1 cargo test --release -p thunder-cpu-simd gelu_bench -- --ignored --nocapture`
//! (`THUNDER_CPU_SIMD_CHAIN=0` for the tile path).

use super::{data, Tb};
use thunder_abi::export::CompiledRegion;
use thunder_abi::{ArgView, DTypeCode::F32, ExecContext, TensorDesc};

fn val(v: u32) -> ArgView {
    ArgView::Value(v)
}

fn lit(x: f64) -> ArgView {
    ArgView::Float(x)
}

/// `x + b` with `b` a row broadcast over `[r, c]`.
fn bias(t: &mut Tb, r: i64, c: i64) -> (u32, u32, u32) {
    let x = t.value(F32, &[r, c]);
    let b = t.value(F32, &[c]);
    let bb = t.op(
        "broadcast_in_dim",
        vec![val(b), super::ints(&[r, c]), super::ints(&[1])],
        F32,
        &[r, c],
    );
    (x, b, t.op("add", vec![val(x), val(bb)], F32, &[r, c]))
}

/// BERT's `0.5 * y * (1 + erf(y / sqrt(2)))` as PyTorch's exporter writes it.
pub(super) fn erf_gelu(t: &mut Tb, r: i64, c: i64) -> (Vec<u32>, u32) {
    let s = [r, c];
    let (x, b, y) = bias(t, r, c);
    let d = t.op(
        "div",
        vec![val(y), lit(f64::from(std::f32::consts::SQRT_2))],
        F32,
        &s,
    );
    let e = t.op("erf", vec![val(d)], F32, &s);
    let a = t.op("add", vec![val(e), lit(1.0)], F32, &s);
    let m = t.op("mul", vec![val(y), val(a)], F32, &s);
    (vec![x, b], t.op("mul", vec![val(m), lit(0.5)], F32, &s))
}

/// GPT-2's `0.5 * y * (1 + tanh(sqrt(2 / pi) * (y + 0.044715 * y^3)))`, the cube as products
/// (as the importer writes `Pow(y, 3)`). Literals are f32 values, as an ONNX file holds them.
pub(super) fn tanh_gelu(t: &mut Tb, r: i64, c: i64) -> (Vec<u32>, u32) {
    let s = [r, c];
    let (x, b, y) = bias(t, r, c);
    let h = t.op("mul", vec![val(y), lit(0.5)], F32, &s);
    let y2 = t.op("mul", vec![val(y), val(y)], F32, &s);
    let y3 = t.op("mul", vec![val(y2), val(y)], F32, &s);
    let k = t.op("mul", vec![val(y3), lit(f64::from(0.044715f32))], F32, &s);
    let i = t.op("add", vec![val(y), val(k)], F32, &s);
    let z = t.op("mul", vec![val(i), lit(f64::from(0.797_884_6f32))], F32, &s);
    let th = t.op("tanh", vec![val(z)], F32, &s);
    let a = t.op("add", vec![val(th), lit(1.0)], F32, &s);
    (vec![x, b], t.op("mul", vec![val(h), val(a)], F32, &s))
}

/// Median and minimum CPU ms per call over `reps` samples of `inner` calls each (CPU time
/// moves in scheduler ticks: a sample should last tens of milliseconds).
fn time(t: &Tb, ids: &[u32], out: u32, reps: usize, inner: usize) -> (f64, f64) {
    time_outs(t, ids, &[out], reps, inner)
}

#[test]
#[ignore = "a benchmark: run it by name with --ignored --nocapture"]
fn gelu_bench() {
    let reps = 7;
    let mut t = Tb::default();
    let (ids, out) = erf_gelu(&mut t, 1024, 1536);
    let (m, lo) = time(&t, &ids, out, reps, 20);
    println!("erf-GELU  [1024, 1536]: median {m:.3} ms, min {lo:.3} ms");
    let mut t = Tb::default();
    let (ids, out) = tanh_gelu(&mut t, 128, 3072);
    let (m, lo) = time(&t, &ids, out, reps, 20);
    println!("tanh-GELU [128, 3072]:  median {m:.3} ms, min {lo:.3} ms");
    // In L2 (2^15 elements in and out) and streamed from memory (2^22): how far the loop is
    // from its arithmetic's bound, and how much the memory traffic adds.
    for log2 in [15, 22] {
        let mut t = Tb::default();
        let n = [1i64 << log2];
        let x = t.value(F32, &n);
        let mut y = x;
        for _ in 0..4 {
            let m = t.op("mul", vec![val(y), lit(f64::from(1.01f32))], F32, &n);
            let a = t.op("add", vec![val(m), lit(0.1)], F32, &n);
            y = t.op("tanh", vec![val(a)], F32, &n);
        }
        let (m, lo) = time(&t, &[x], y, reps, 20 << (22 - log2));
        let ns = lo * 1e6 / (1u64 << log2) as f64;
        println!("tanh4     [2^{log2}]:       median {m:.3} ms, min {lo:.3} ms ({ns:.3} ns an element at the min)");
    }
}

/// [`time`] for a region with several outputs.
fn time_outs(t: &Tb, ids: &[u32], outs_ids: &[u32], reps: usize, inner: usize) -> (f64, f64) {
    let region = t.compile(ids, outs_ids);
    let view = t.view(ids, outs_ids);
    let shape = |i: u32| view.values[i as usize].shape.to_vec();
    let inputs: Vec<Vec<f32>> = ids
        .iter()
        .enumerate()
        .map(|(k, &i)| data(shape(i).iter().product::<i64>() as usize, 40 + k as u64))
        .collect();
    let mut outs: Vec<Vec<f32>> = outs_ids
        .iter()
        .map(|&i| vec![0f32; shape(i).iter().product::<i64>() as usize])
        .collect();
    let in_shapes: Vec<Vec<i64>> = ids.iter().map(|&i| shape(i)).collect();
    let out_shapes: Vec<Vec<i64>> = outs_ids.iter().map(|&i| shape(i)).collect();
    let ins: Vec<TensorDesc<'_>> = inputs
        .iter()
        .zip(&in_shapes)
        .map(|(v, s)| super::f32_desc(v.as_ptr(), s))
        .collect();
    let mut ts = Vec::new();
    for _ in 0..reps + 2 {
        let od: Vec<TensorDesc<'_>> = outs
            .iter_mut()
            .zip(&out_shapes)
            .map(|(v, s)| super::f32_desc(v.as_mut_ptr(), s))
            .collect();
        let c = super::cpu_clock();
        for _ in 0..inner {
            region.run(&ins, &od, &ExecContext::CPU).expect("run");
        }
        ts.push(super::cpu_seconds_since(&c) * 1e3 / inner as f64);
    }
    let mut ts = ts.split_off(2);
    ts.sort_by(f64::total_cmp);
    (ts[ts.len() / 2], ts[0])
}

/// The GPT-2 block's largest backward group (31 instructions, one fold): the MLP's tanh-GELU
/// recomputed from `mm + b`, its output `h`, the gradient through it `dy = g * gelu'(y)`, and
/// the bias gradient `sum(dy, 0)`. Returns the inputs `[mm, b, g]` and the outputs
/// `[h, dy, db]`.
pub(super) fn gelu_backward(t: &mut Tb, r: i64, c: i64) -> (Vec<u32>, Vec<u32>) {
    let s = [r, c];
    let (mm, b, y) = bias(t, r, c);
    let g = t.value(F32, &s);
    let mul = |t: &mut Tb, a: u32, b: u32| t.op("mul", vec![val(a), val(b)], F32, &s);
    let mull = |t: &mut Tb, a: u32, x: f32| t.op("mul", vec![val(a), lit(f64::from(x))], F32, &s);
    let add = |t: &mut Tb, a: u32, b: u32| t.op("add", vec![val(a), val(b)], F32, &s);
    let y2 = mul(t, y, y);
    let y3 = mul(t, y2, y);
    let k = mull(t, y3, 0.044715);
    let i = add(t, y, k);
    let z = mull(t, i, 0.797_884_6);
    let th = t.op("tanh", vec![val(z)], F32, &s);
    let a = t.op("add", vec![val(th), lit(1.0)], F32, &s);
    let hy = mull(t, y, 0.5);
    let h = mul(t, hy, a);
    let ga = mul(t, g, a);
    let ghy = mul(t, g, hy);
    let d1 = mull(t, ga, 0.5);
    let t2 = mul(t, th, th);
    let omt = t.op("sub", vec![lit(1.0), val(t2)], F32, &s);
    let dz = mul(t, ghy, omt);
    let di = mull(t, dz, 0.797_884_6);
    let dy0 = add(t, d1, di);
    let dk = mull(t, di, 0.044715);
    let dk_y = mul(t, dk, y);
    let dk_y2 = mul(t, dk, y2);
    let s1 = add(t, dy0, dk_y2);
    let dk_yy = mul(t, dk_y, y);
    let s2 = add(t, s1, dk_yy);
    let dy = add(t, s2, dk_yy);
    let db = t.op("sum", vec![val(dy), super::ints(&[0])], F32, &[c]);
    (vec![mm, b, g], vec![h, dy, db])
}

/// [`gelu_backward`] timed on [256, 1024]. Run with
/// `RAYON_NUM_THREADS=1 cargo test --release -p thunder-cpu-simd gelu_backward_bench -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: run it by name with --ignored --nocapture"]
fn gelu_backward_bench() {
    let (r, c) = (256i64, 1024i64);
    let mut t = Tb::default();
    let (ins, outs) = gelu_backward(&mut t, r, c);
    let (m, lo) = time_outs(&t, &ins, &outs, 7, 50);
    println!(
        "GELU backward + bias grad [{r}, {c}], {} threads: median {m:.3} ms, min {lo:.3} ms",
        rayon::current_num_threads()
    );
}
