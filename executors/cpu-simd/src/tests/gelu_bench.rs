//! The elementwise groups of the ONNX transformers, each compiled once as a region and run
//! repeatedly, timed in CPU time of the whole process: BERT's bias + erf-GELU on [1024, 1536],
//! GPT-2's bias + tanh-GELU on [128, 3072] and a 4x `tanh(x * 1.01 + 0.1)` chain on 2^15
//! (in L2) and 2^22 elements. Ignored by default; run with
//! `RAYON_NUM_THREADS=1 cargo test --release -p thunder-cpu-simd gelu_bench -- --ignored --nocapture`
//! (`THUNDER_CPU_SIMD_CHAIN=0` for the tile path).

use super::{data, services, Tb};
use crate::region::Region;
use std::ffi::c_void;
use thunder_abi::export::CompiledRegion;
use thunder_abi::{
    ArgView, DTypeCode, DTypeCode::F32, DeviceDesc, ExecContext, RegionSpec, TensorDesc,
};

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

/// CPU time of all this process's threads, in seconds.
fn cpu_seconds() -> f64 {
    let mut ns = 0u64;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for t in dir.flatten() {
            let s = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            ns += s
                .split_whitespace()
                .next()
                .and_then(|x| x.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ns as f64 * 1e-9
}

fn desc(p: *mut f32, shape: &[i64]) -> TensorDesc<'_> {
    TensorDesc {
        data: p as *mut c_void,
        byte_offset: 0,
        device: DeviceDesc::CPU,
        dtype: DTypeCode::F32,
        shape: shape.into(),
        strides: (&[][..]).into(),
    }
}

/// Median and minimum CPU ms per call over `reps` samples of `inner` calls each (CPU time
/// moves in scheduler ticks: a sample should last tens of milliseconds).
fn time(t: &Tb, ids: &[u32], out: u32, reps: usize, inner: usize) -> (f64, f64) {
    let view = t.view(ids, &[out]);
    let spec = RegionSpec {
        ops: (0..view.ops.len() as u32).collect(),
        inputs: ids.to_vec().into(),
        outputs: vec![out].into(),
    };
    let region = Region::compile(&view, &spec, services()).expect("compile");
    let shapes: Vec<Vec<i64>> = ids
        .iter()
        .map(|&i| view.values[i as usize].shape.to_vec())
        .collect();
    let inputs: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| data(s.iter().product::<i64>() as usize, 40 + i as u64))
        .collect();
    let os = view.values[out as usize].shape.to_vec();
    let mut o = vec![0f32; os.iter().product::<i64>() as usize];
    let ins: Vec<TensorDesc<'_>> = inputs
        .iter()
        .zip(&shapes)
        .map(|(v, s)| desc(v.as_ptr() as *mut f32, s))
        .collect();
    let mut ts = Vec::new();
    for _ in 0..reps + 2 {
        let outs = [desc(o.as_mut_ptr(), &os)];
        let c = cpu_seconds();
        for _ in 0..inner {
            region.run(&ins, &outs, &ExecContext::CPU).expect("run");
        }
        ts.push((cpu_seconds() - c) * 1e3 / inner as f64);
    }
    let mut ts = ts.split_off(2);
    ts.sort_by(f64::total_cmp);
    (ts[ts.len() / 2], ts[0])
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
