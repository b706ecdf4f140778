//! The demo: a small MLP classifier traced, compiled through the plugins and run, printing
//! every stage so the user sees what happened and who ran what.

use crate::host_args::HostArgs;
use anyhow::Result;
use std::sync::Arc;
use std::time::Instant;
use thunder_core::{jit_with, Array, DType};

pub fn run(args: &HostArgs) -> Result<()> {
    let host = Arc::new(args.host()?);
    let mlp = jit_with(host, |xs| {
        let (x, w1, b1, w2, b2) = (&xs[0], &xs[1], &xs[2], &xs[3], &xs[4]);
        let h = x.linear(w1, Some(b1)).relu();
        let logits = h.linear(w2, Some(b2));
        vec![logits.softmax(-1)]
    })
    .with_input_names(&["x", "w1", "b1", "w2", "b2"]);

    let (batch, d_in, hidden, classes) = (4, 16, 32, 10);
    let inputs = [
        Array::random(&[batch, d_in], DType::F32, 1)?,
        Array::random(&[hidden, d_in], DType::F32, 2)?,
        Array::random(&[hidden], DType::F32, 3)?,
        Array::random(&[classes, hidden], DType::F32, 4)?,
        Array::random(&[classes], DType::F32, 5)?,
    ];
    let start = Instant::now();
    let out = mlp.call(&inputs)?;
    let first = start.elapsed();
    let traces = mlp
        .last_traces()
        .ok_or_else(|| anyhow::anyhow!("no traces recorded"))?;
    println!(
        "=== initial trace ===\n{}",
        thunder_core::text::print_trace(&traces.initial)
    );
    println!(
        "=== final trace (after passes) ===\n{}",
        thunder_core::text::print_trace(traces.final_trace())
    );
    println!("=== execution trace ===\n{}", traces.execution.print());

    let probs = out[0].to_vec::<f32>()?;
    for (row, p) in probs.chunks(classes as usize).enumerate() {
        let (best, pmax) =
            p.iter().enumerate().fold(
                (0, f32::MIN),
                |acc, (i, &v)| if v > acc.1 { (i, v) } else { acc },
            );
        println!(
            "row {row}: class {best} with p = {pmax:.3} (row sums to {:.6})",
            p.iter().sum::<f32>()
        );
    }
    let n = 1000;
    let start = Instant::now();
    for _ in 0..n {
        mlp.call(&inputs)?;
    }
    let per_call = start.elapsed() / n;
    println!(
        "first call (trace + passes + claim + compile + run): {first:?}; cached call: {per_call:?} \
         ({} trace, {} cache hits)",
        mlp.cache_misses(),
        mlp.cache_hits()
    );
    Ok(())
}
