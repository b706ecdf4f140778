//! ResNet-50's convolution classes, each compiled once as a region with its epilogue and run
//! repeatedly, timed in CPU time of the whole process (steadier than wall time on a shared
//! machine). Ignored by default; run with
//! `RAYON_NUM_THREADS=1 cargo test --release -p thunder-cpu-simd conv_bench -- --ignored --nocapture`
//! (`CONV_BENCH_BATCH=8` for batch 8, `CONV_BENCH_ONLY=3x3` to pick classes by name,
//! `CONV_BENCH_CHANNELS_LAST=1` for weights stored `[C_in, kh, kw, C_out]`, `CONV_BENCH_STATIC=1`
//! for a static weight, as in an ONNX session).
//!
//! `CONV_BENCH_EVICT=1`: each call after streaming 256 MB, timed in the calling thread's CPU
//! time (one thread): weights and activations cold, as in a whole model, where they were last
//! touched a forward ago. `CONV_BENCH_AB=VAR=VALUE`: rounds alternate between the environment
//! as it is (A) and with `VAR=VALUE` (B), for switches the executor reads per call, so both
//! see the same load on a shared machine; with `CONV_BENCH_EVICT`, `CONV_BENCH_WARM=1` warms
//! B's activations (not its weights) after the eviction.

use super::{data, ints, services, Tb};
use crate::region::Region;
use thunder_abi::export::CompiledRegion;
use thunder_abi::{ArgView, DTypeCode::F32, ExecContext, RegionSpec, TensorDesc};

/// (name, c_in, c_out, input size, kernel, stride, tail: 0 none, 1 relu, 2 add + relu)
const CLASSES: &[(&str, usize, usize, usize, usize, usize, u8)] = &[
    ("stem 7x7 s2", 3, 64, 224, 7, 2, 1),
    ("1x1 64-64 @56", 64, 64, 56, 1, 1, 1),
    ("3x3 64 @56", 64, 64, 56, 3, 1, 1),
    ("1x1 64-256 @56 res", 64, 256, 56, 1, 1, 2),
    ("1x1 64-256 @56 down", 64, 256, 56, 1, 1, 0),
    ("1x1 256-64 @56", 256, 64, 56, 1, 1, 1),
    ("1x1 256-128 @56", 256, 128, 56, 1, 1, 1),
    ("3x3 s2 128 @56", 128, 128, 56, 3, 2, 1),
    ("1x1 s2 256-512 @56 down", 256, 512, 56, 1, 2, 0),
    ("1x1 128-512 @28 res", 128, 512, 28, 1, 1, 2),
    ("1x1 512-128 @28", 512, 128, 28, 1, 1, 1),
    ("3x3 128 @28", 128, 128, 28, 3, 1, 1),
    ("1x1 512-256 @28", 512, 256, 28, 1, 1, 1),
    ("3x3 s2 256 @28", 256, 256, 28, 3, 2, 1),
    ("1x1 256-1024 @14 res", 256, 1024, 14, 1, 1, 2),
    ("1x1 1024-256 @14", 1024, 256, 14, 1, 1, 1),
    ("3x3 256 @14", 256, 256, 14, 3, 1, 1),
    ("1x1 1024-512 @14", 1024, 512, 14, 1, 1, 1),
    ("3x3 s2 512 @14", 512, 512, 14, 3, 2, 1),
    ("1x1 512-2048 @7 res", 512, 2048, 7, 1, 1, 2),
    ("1x1 2048-512 @7", 2048, 512, 7, 1, 1, 1),
    ("3x3 512 @7", 512, 512, 7, 3, 1, 1),
];

#[test]
#[ignore = "a benchmark: run it by name with --ignored --nocapture"]
fn conv_bench() {
    let n: i64 = std::env::var("CONV_BENCH_BATCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let only = std::env::var("CONV_BENCH_ONLY").unwrap_or_default();
    let mut total = 0.0;
    for &(name, ci, co, size, k, s, tail) in CLASSES {
        if !name.contains(only.as_str()) {
            continue;
        }
        let pad = (k / 2) as i64;
        let o = (size as i64 + 2 * pad - k as i64) / s as i64 + 1;
        let (ci, co, size, k, s) = (ci as i64, co as i64, size as i64, k as i64, s as i64);
        let mut tb = Tb::default();
        let xs = [n, ci, size, size];
        let ws = [co, ci, k, k];
        let os = [n, co, o, o];
        let x = tb.value(F32, &xs);
        // `CONV_BENCH_CHANNELS_LAST=1`: weights stored `[C_in, kh, kw, C_out]` and transposed
        // in the region (read as a strided GEMM operand).
        let channels_last = std::env::var("CONV_BENCH_CHANNELS_LAST").is_ok();
        let ws_in = if channels_last { [ci, k, k, co] } else { ws };
        let w_in = tb.value(F32, &ws_in);
        let w = if channels_last {
            tb.op(
                "transpose",
                vec![ArgView::Value(w_in), ints(&[3, 0, 1, 2])],
                F32,
                &ws,
            )
        } else {
            w_in
        };
        let b = tb.value(F32, &[co]);
        let r = tb.value(F32, &os);
        let mut out = tb.op(
            "convolution",
            vec![
                ArgView::Value(x),
                ArgView::Value(w),
                ArgView::Value(b),
                ints(&[s, s]),
                ints(&[pad, pad]),
                ints(&[1, 1]),
                ArgView::Int(1),
            ],
            F32,
            &os,
        );
        let mut ids = vec![x, w_in, b];
        let mut shapes = vec![xs.to_vec(), ws_in.to_vec(), vec![co]];
        if tail == 2 {
            out = tb.op(
                "add",
                vec![ArgView::Value(r), ArgView::Value(out)],
                F32,
                &os,
            );
            ids.push(r);
            shapes.push(os.to_vec());
        }
        if tail >= 1 {
            out = tb.op(
                "maximum",
                vec![ArgView::Value(out), ArgView::Float(0.0)],
                F32,
                &os,
            );
        }
        let view = tb.view(&ids, &[out]);
        let spec = RegionSpec {
            ops: (0..view.ops.len() as u32).collect(),
            inputs: ids.clone().into(),
            outputs: vec![out].into(),
        };
        // `CONV_BENCH_STATIC=1`: the weight a static input (as an ONNX session's), kept packed
        // from the second call on AVX2 CPUs without AVX-512.
        let statics: &[u32] = if std::env::var("CONV_BENCH_STATIC").is_ok() {
            &[1]
        } else {
            &[]
        };
        let region = Region::compile(&view, &spec, services(), statics).expect("compile");
        let inputs: Vec<Vec<f32>> = shapes
            .iter()
            .enumerate()
            .map(|(i, sh)| data(sh.iter().product::<i64>() as usize, i as u64 + 1))
            .collect();
        let mut result = vec![0f32; os.iter().product::<i64>() as usize];
        let in_descs: Vec<TensorDesc<'_>> = inputs
            .iter()
            .zip(&shapes)
            .map(|(v, sh)| super::f32_desc(v.as_ptr(), sh))
            .collect();
        let out_descs = [super::f32_desc(result.as_mut_ptr(), &os)];
        let flops = 2.0 * (n * co * o * o * ci * k * k) as f64;
        // About 0.4 s of work per class (at ~100 GFLOP/s), at least 5 calls.
        let reps = ((4e10 / flops) as usize).max(5);
        region
            .run(&in_descs, &out_descs, &ExecContext::CPU)
            .expect("run");
        let evict = std::env::var("CONV_BENCH_EVICT").is_ok();
        if evict && std::env::var("CONV_BENCH_AB").is_err() {
            // Every call after streaming through 256 MB (as in a model, where the weights and
            // the input were last touched a whole forward ago); the calling thread's CPU time
            // of the call alone (single-threaded runs only).
            let mut junk = vec![0u8; 256 << 20];
            let mut per = Vec::new();
            for i in 0..reps.clamp(5, 40) {
                junk.iter_mut()
                    .step_by(64)
                    .for_each(|x| *x = x.wrapping_add(i as u8));
                let t = crate::conv::thread_cpu_us();
                region
                    .run(&in_descs, &out_descs, &ExecContext::CPU)
                    .expect("run");
                per.push((crate::conv::thread_cpu_us() - t) * 1e-6);
            }
            per.sort_by(f64::total_cmp);
            let med = per[per.len() / 2];
            total += med;
            println!(
                "{name:26} {:8.1} us cpu  {:6.1} GFLOP/s (cold caches)",
                med * 1e6,
                flops / med * 1e-9
            );
            continue;
        }
        if let Ok(ab) = std::env::var("CONV_BENCH_AB") {
            // Interleaved A/B: rounds alternate between the environment as it is and with
            // `VAR=VALUE` set, so both see the same machine load; wall times per call.
            let (var, value) = ab.split_once('=').expect("CONV_BENCH_AB=VAR=VALUE");
            let mut walls = [Vec::new(), Vec::new()];
            let calls = reps.div_ceil(5).max(3);
            let mut junk = vec![0u8; if evict { 256 << 20 } else { 0 }];
            for round in 0..if evict { 40 } else { 20 } {
                if round % 2 == 1 {
                    std::env::set_var(var, value);
                } else {
                    std::env::remove_var(var);
                }
                if evict {
                    // One cold call, timed in this thread's CPU time (1 thread only).
                    junk.iter_mut()
                        .step_by(64)
                        .for_each(|x| *x = x.wrapping_add(1));
                    if std::env::var("CONV_BENCH_WARM") == Ok(format!("{}", round % 2)) {
                        // Warm the activations (input, residual) and the output again: only
                        // the weights stay cold, as with buffers reused between stages.
                        let mut acc = 0f32;
                        for (i, v) in inputs.iter().enumerate() {
                            if i != 1 {
                                acc += v.iter().step_by(16).sum::<f32>();
                            }
                        }
                        result.iter_mut().step_by(16).for_each(|x| *x = acc);
                    }
                    let t = crate::conv::thread_cpu_us();
                    region
                        .run(&in_descs, &out_descs, &ExecContext::CPU)
                        .expect("run");
                    walls[round % 2].push(crate::conv::thread_cpu_us() - t);
                    continue;
                }
                let w = std::time::Instant::now();
                for _ in 0..calls {
                    region
                        .run(&in_descs, &out_descs, &ExecContext::CPU)
                        .expect("run");
                }
                walls[round % 2].push(w.elapsed().as_secs_f64() / calls as f64 * 1e6);
            }
            std::env::remove_var(var);
            for w in &mut walls {
                w.sort_by(f64::total_cmp);
            }
            let mid = walls[0].len() / 2;
            let (a, b) = (walls[0][mid], walls[1][mid]);
            total += a * 1e-6;
            println!(
                "{name:26} A {a:8.1} B {b:8.1} us median (B/A {:.3}); min A {:8.1} B {:8.1} (B/A {:.3})",
                b / a,
                walls[0][0],
                walls[1][0],
                walls[1][0] / walls[0][0]
            );
            continue;
        }
        let (mut per, mut wall) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let (t, w) = (super::cpu_clock(), std::time::Instant::now());
            for _ in 0..reps.div_ceil(5) {
                region
                    .run(&in_descs, &out_descs, &ExecContext::CPU)
                    .expect("run");
            }
            per.push(super::cpu_seconds_since(&t) / reps.div_ceil(5) as f64);
            wall.push(w.elapsed().as_secs_f64() / reps.div_ceil(5) as f64);
        }
        per.sort_by(f64::total_cmp);
        wall.sort_by(f64::total_cmp);
        let med = per[2];
        total += med;
        println!(
            "{name:26} {:8.1} us cpu  {:6.1} GFLOP/s  wall median {:8.1} min {:8.1} us",
            med * 1e6,
            flops / med * 1e-9,
            wall[2] * 1e6,
            wall[0] * 1e6,
        );
    }
    println!(
        "sum of classes {:.1} us (A's medians with CONV_BENCH_AB)",
        total * 1e6
    );
}
