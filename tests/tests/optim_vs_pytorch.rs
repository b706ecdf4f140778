//! SGD (momentum, weight decay) and AdamW as traced functions, stepped three times, against
//! torch.optim trajectories stored by `scripts/gen_optim_fixtures.py`.

use safetensors::SafeTensors;
use thunder_core::{jit_with, Array, Tensor};
use thunder_tests::{interpreter_host, repo_root};
use thunder_torch::optim::{adamw, sgd, AdamWConfig};

fn load(st: &SafeTensors, name: &str) -> Array {
    let t = st.tensor(name).unwrap();
    let v: Vec<f32> = t
        .data()
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Array::from_slice(&v, &[3, 4]).unwrap()
}

fn assert_close(got: &Array, want: &Array, what: &str) {
    for (a, b) in got
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .zip(want.to_vec::<f32>().unwrap())
    {
        assert!(
            (a - b).abs() <= 1e-6 + 1e-5 * b.abs(),
            "{what}: {a} vs torch {b}"
        );
    }
}

#[test]
fn sgd_and_adamw_follow_torch() {
    let bytes = std::fs::read(repo_root().join("tests/fixtures/optim.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let host = interpreter_host();
    let sgd_step = jit_with(
        host.clone(),
        |x: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
            let (p, b) = sgd(&x[0..1], &x[1..2], &x[2..3], 0.1, 0.9, 1e-2)?;
            Ok(vec![p[0].clone(), b[0].clone()])
        },
    );
    let adamw_step = jit_with(host, |x: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
        let cfg = AdamWConfig {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 1e-2,
        };
        let (p, m, v) = adamw(&x[0..1], &x[1..2], &x[2..3], &x[3..4], &x[4], cfg)?;
        Ok(vec![p[0].clone(), m[0].clone(), v[0].clone()])
    });
    let zeros = Array::from_slice(&[0.0f32; 12], &[3, 4]).unwrap();
    let (mut p_sgd, mut buf) = (load(&st, "p0"), zeros.clone());
    let (mut p_adam, mut m, mut v) = (load(&st, "p0"), zeros.clone(), zeros);
    for step in 1..=3 {
        let g = load(&st, &format!("g{step}"));
        let out = sgd_step.call(&[p_sgd, g.clone(), buf]).unwrap();
        (p_sgd, buf) = (out[0].clone(), out[1].clone());
        assert_close(
            &p_sgd,
            &load(&st, &format!("sgd{step}")),
            &format!("sgd step {step}"),
        );
        let t = Array::scalar(step as f32).unwrap();
        let out = adamw_step.call(&[p_adam, g, m, v, t]).unwrap();
        (p_adam, m, v) = (out[0].clone(), out[1].clone(), out[2].clone());
        assert_close(
            &p_adam,
            &load(&st, &format!("adamw{step}")),
            &format!("adamw step {step}"),
        );
    }
    assert_eq!(
        (sgd_step.cache_misses(), adamw_step.cache_misses()),
        (1, 1),
        "one trace serves every step"
    );
}
