//! The prim contract for number literals: a literal beside a float tensor is rounded to the
//! tensor's dtype first (as torch casts a Python scalar), so f32 arithmetic with it is exact f32
//! arithmetic. Both CPU executors must agree with Rust's own f32 operations bit for bit.

use std::sync::Arc;
use thunder_core::host::Config;
use thunder_core::{jit_with, Array, PluginHost, Tensor};
use thunder_tests::{interpreter_host, interpreter_library, target_dir};
use thunder_torch::prelude::*;

fn cpu_simd_host() -> Arc<PluginHost> {
    let lib = target_dir().join(format!(
        "{}thunder_cpu_simd{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let text = format!(
        "[[executor]]\nname = \"cpu-simd\"\nlibrary = \"{}\"\npriority = 20\n\n[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n",
        lib.display(),
        interpreter_library().display()
    );
    let host = PluginHost::load(&Config::parse(&text, "t.toml".as_ref()).unwrap(), &[]);
    assert!(host.issues().is_empty(), "{:?}", host.issues());
    Arc::new(host)
}

#[test]
fn float_literals_are_rounded_to_the_tensor_dtype() {
    let x: Vec<f32> = (0..4099).map(|i| (i as f32 - 2000.0) * 0.013_7).collect();
    let want: Vec<u32> = x
        .iter()
        .map(|&v| {
            let y = (v * 1.01f32 + 0.1f32) * 1.01f32 + 0.1f32;
            // Comparisons use the rounded literal too: f32(0.1) > 0.1 as an f64.
            let keep = y > 0.1f32;
            if keep { y } else { 0.0 }.to_bits()
        })
        .collect();
    for (name, host) in [
        ("interpreter", interpreter_host()),
        ("cpu-simd", cpu_simd_host()),
    ] {
        let f = jit_with(host, |xs: &[Tensor]| {
            let y = (&xs[0] * 1.01 + 0.1) * 1.01 + 0.1;
            vec![y.gt(0.1).select(&y, 0.0)]
        });
        let out = f.call(&[Array::from_slice(&x, &[4099]).unwrap()]).unwrap();
        let got: Vec<u32> = out[0]
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(
            differ, 0,
            "{name}: {differ} elements differ from f32 arithmetic"
        );
        let exec = f.last_traces().unwrap().execution.print();
        assert!(exec.contains(&format!("{name}.region0")), "{exec}");
    }
}
