//! `prims.uniform` / `prims.normal` (Philox4x32-10, checked against Random123's known answers
//! in the interpreter's unit tests) through ltorch: distributions, determinism, the documented
//! counter mapping, and dropout.

use thunder_core::trace_ctx::sticky;
use thunder_core::{jit_with, Array, DType, Device, Tensor};
use thunder_tests::interpreter_host;
use thunder_torch as ltorch;

fn run(f: impl Fn(&[Tensor]) -> Vec<Tensor> + Send + Sync + 'static, inputs: &[Array]) -> Vec<f64> {
    let j = jit_with(interpreter_host(), f);
    j.call(inputs).expect("run")[0]
        .to_f64_vec()
        .expect("host array")
}

fn rand(shape: &'static [i64], seed: u64, offset: u64, dtype: DType) -> Vec<f64> {
    run(
        move |_| {
            vec![sticky(ltorch::rand(
                shape,
                seed,
                offset,
                dtype,
                Device::Cpu,
            ))]
        },
        &[],
    )
}

fn randn(shape: &'static [i64], seed: u64, offset: u64, dtype: DType) -> Vec<f64> {
    run(
        move |_| {
            vec![sticky(ltorch::randn(
                shape,
                seed,
                offset,
                dtype,
                Device::Cpu,
            ))]
        },
        &[],
    )
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    (mean, v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n)
}

#[test]
fn a_million_uniforms_have_the_moments_of_u01() {
    let v = rand(&[1000, 1000], 42, 0, DType::F64);
    assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
    let (mean, var) = mean_var(&v);
    // Standard errors: 0.00029 for the mean, 0.000075 for the variance; bounds are ~6 of them.
    assert!((mean - 0.5).abs() < 0.0018, "mean {mean}");
    assert!((var - 1.0 / 12.0).abs() < 0.0005, "var {var}");
    let below = v.iter().filter(|&&x| x < 0.25).count() as f64 / v.len() as f64;
    assert!((below - 0.25).abs() < 0.003, "P(u < 0.25) = {below}");
}

#[test]
fn a_million_normals_have_the_moments_of_n01() {
    let v = randn(&[1_000_000], 7, 3, DType::F32);
    let (mean, var) = mean_var(&v);
    assert!(mean.abs() < 0.006, "mean {mean}");
    assert!((var - 1.0).abs() < 0.009, "var {var}");
    let within = v.iter().filter(|x| x.abs() < 1.0).count() as f64 / v.len() as f64;
    assert!((within - 0.682_689).abs() < 0.003, "P(|z| < 1) = {within}");
    let skew = v.iter().map(|x| (x - mean).powi(3)).sum::<f64>() / v.len() as f64;
    assert!(skew.abs() < 0.02, "third moment {skew}");
}

#[test]
fn equal_seed_and_offset_repeat_and_others_differ() {
    let a = rand(&[64], 1, 0, DType::F32);
    assert_eq!(a, rand(&[64], 1, 0, DType::F32));
    let b = rand(&[64], 2, 0, DType::F32);
    let c = rand(&[64], 1, 1, DType::F32);
    assert_eq!(a.iter().zip(&b).filter(|(x, y)| x == y).count(), 0);
    assert_eq!(a.iter().zip(&c).filter(|(x, y)| x == y).count(), 0);
    assert_eq!(randn(&[9], 5, 9, DType::F64), randn(&[9], 5, 9, DType::F64));
    assert_ne!(randn(&[9], 5, 9, DType::F64), randn(&[9], 6, 9, DType::F64));
}

#[test]
fn offsets_count_blocks_of_two_elements() {
    // The documented mapping: element i reads block offset + i / 2, so offset 3 is the
    // stream of offset 0 with its first six elements dropped, whatever the shape.
    let long = rand(&[4, 5], 11, 0, DType::F64);
    let shifted = rand(&[14], 11, 3, DType::F64);
    assert_eq!(shifted[..], long[6..]);
    // Seeds are u64: the high word is part of the key.
    assert_ne!(
        rand(&[8], 1, 0, DType::F64),
        rand(&[8], 1 | (1 << 32), 0, DType::F64)
    );
    // Narrow dtypes are the f64 numbers rounded once.
    let wide = rand(&[16], 3, 0, DType::F64);
    let narrow = rand(&[16], 3, 0, DType::BF16);
    for (w, n) in wide.iter().zip(&narrow) {
        assert!((w - n).abs() <= w.abs() * 2f64.powi(-8), "{w} vs bf16 {n}");
    }
}

#[test]
fn dropout_keeps_one_minus_p_scaled_by_its_inverse() {
    let x = Array::from_slice(&vec![2.0f64; 100_000], &[100_000]).unwrap();
    let drop = |p: f64, training: bool, seed: u64| {
        run(
            move |xs| vec![sticky(ltorch::dropout(&xs[0], p, training, seed, 0))],
            std::slice::from_ref(&x),
        )
    };
    let out = drop(0.3, true, 5);
    let kept: Vec<&f64> = out.iter().filter(|&&v| v != 0.0).collect();
    for v in &kept {
        assert!((**v - 2.0 / 0.7).abs() < 1e-12, "kept value {v}");
    }
    let frac = kept.len() as f64 / out.len() as f64;
    assert!((frac - 0.7).abs() < 0.007, "kept fraction {frac}");
    assert_eq!(out, drop(0.3, true, 5));
    assert_ne!(out, drop(0.3, true, 6));
    assert!(drop(0.3, false, 5).iter().all(|&v| v == 2.0));
    assert!(drop(0.0, true, 5).iter().all(|&v| v == 2.0));
    assert!(drop(1.0, true, 5).iter().all(|&v| v == 0.0));
}

#[test]
fn bad_arguments_name_the_op_and_the_argument() {
    let j = jit_with(interpreter_host(), |_: &[Tensor]| {
        vec![sticky(ltorch::rand(&[2], 0, 0, DType::I32, Device::Cpu))]
    });
    let err = j.call(&[]).unwrap_err().to_string();
    assert!(
        err.contains("ltorch.rand") && err.contains("argument 3 (dtype)"),
        "{err}"
    );
    let x = Array::from_slice(&[1.0f64, 2.0], &[2]).unwrap();
    let j = jit_with(interpreter_host(), |xs: &[Tensor]| {
        vec![sticky(ltorch::dropout(&xs[0], 1.5, true, 0, 0))]
    });
    let err = j.call(&[x]).unwrap_err().to_string();
    assert!(
        err.contains("ltorch.dropout") && err.contains("argument 1 (p)"),
        "{err}"
    );
    let text = "def computation():\n  t0 = prims.uniform([2], 1.0, 0.0, 0, 0, devices.cpu, dtypes.f32)\n  return (t0,)\n";
    let err = thunder_torch::parse_trace(text).unwrap_err().to_string();
    assert!(
        err.contains("prims.uniform") && err.contains("argument 1 (low = 1)"),
        "{err}"
    );
}
