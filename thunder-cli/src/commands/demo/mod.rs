//! The demo: train an MLP on the digits dataset through the jit, with autograd, an SGD step
//! as a traced function, a progress bar, the loss per epoch, the test accuracy, and the
//! forward and backward execution traces so the user sees which executor ran what.

mod digits;
mod mlp;

use crate::host_args::HostArgs;
use anyhow::{anyhow, Result};
use digits::{Digits, CLASSES};
use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use thunder_core::autograd::value_and_grad;
use thunder_core::{jit_with, Array, Device, Tensor};
use thunder_torch::optim;
use thunder_torch::prelude::*;

pub struct DemoOptions<'a> {
    pub data: &'a Path,
    pub epochs: usize,
    pub batch: usize,
    pub lr: f64,
    pub quiet_traces: bool,
    pub device: &'a str,
}

fn accuracy(
    predict: &thunder_core::Jitted,
    params: &[Array],
    data: &Digits,
    idx: &[usize],
    device: Device,
) -> Result<f64> {
    let x = data.batch(idx)?.0.to(device)?;
    let mut inputs = params.to_vec();
    inputs.push(x);
    let logits = predict.call(&inputs)?.remove(0).to_vec::<f32>()?;
    let correct = logits
        .chunks(CLASSES)
        .zip(idx)
        .filter(|(row, &i)| {
            let best = row
                .iter()
                .enumerate()
                .fold(0, |b, (k, &v)| if v > row[b] { k } else { b });
            best as i64 == data.labels[i]
        })
        .count();
    Ok(correct as f64 / idx.len() as f64)
}

pub fn run(args: &HostArgs, opts: &DemoOptions) -> Result<()> {
    let start = Instant::now();
    let device = Device::parse(opts.device).ok_or_else(|| {
        anyhow!(
            "--device: `{}` is not a device (expected cpu, cuda or cuda:N)",
            opts.device
        )
    })?;
    let host = Arc::new(args.host()?);
    let data = Digits::load(opts.data)?;
    let (train, test) = data.split(0.2, 0);
    println!(
        "digits: {} images, {} for training, {} held out for testing",
        data.len(),
        train.len(),
        test.len()
    );

    let mut names: Vec<&str> = mlp::PARAM_NAMES.to_vec();
    names.extend(["x", "y"]);
    let loss_and_grad = value_and_grad(Some(host.clone()), |xs: &[Tensor]| {
        vec![mlp::logits(&xs[..6], &xs[6]).cross_entropy(&xs[7])]
    })
    .with_input_names(&names);
    let lr = opts.lr;
    let sgd_step = jit_with(
        host.clone(),
        move |xs: &[Tensor]| -> thunder_core::Result<Vec<Tensor>> {
            let (p, bufs) = optim::sgd(&xs[0..6], &xs[6..12], &xs[12..18], lr, 0.9, 0.0)?;
            Ok(p.into_iter().chain(bufs).collect())
        },
    );
    let predict = jit_with(host, |xs: &[Tensor]| vec![mlp::logits(&xs[..6], &xs[6])]);

    let mut params = mlp::init_params(0)?
        .iter()
        .map(|p| Ok(p.to(device)?.with_requires_grad(true)))
        .collect::<thunder_core::Result<Vec<_>>>()?;
    let mut bufs: Vec<Array> = params
        .iter()
        .map(|p| Array::from_f64(&vec![0.0; p.numel()], p.shape(), p.dtype())?.to(device))
        .collect::<thunder_core::Result<_>>()?;
    let steps_per_epoch = train.len() / opts.batch;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut order = train.clone();
    for epoch in 1..=opts.epochs {
        order.shuffle(&mut rng);
        let bar = ProgressBar::new(steps_per_epoch as u64);
        bar.set_style(
            ProgressStyle::with_template("epoch {prefix:>2} [{bar:30}] {pos}/{len} {msg}")?
                .progress_chars("=> "),
        );
        bar.set_prefix(epoch.to_string());
        let mut total = 0.0;
        for (step, chunk) in order.chunks_exact(opts.batch).enumerate() {
            let (x, y) = data.batch(chunk)?;
            let mut inputs = params.clone();
            inputs.extend([x.to(device)?, y.to(device)?]);
            let (loss, grads) = loss_and_grad.call(&inputs)?;
            let loss = loss[0].to_vec::<f32>()?[0] as f64;
            total += loss;
            let mut update = params.clone();
            update.extend(grads);
            update.extend(bufs);
            let mut out = sgd_step.call(&update)?;
            bufs = out.split_off(6);
            params = out
                .into_iter()
                .map(|p| p.with_requires_grad(true))
                .collect();
            bar.set_message(format!("loss {:.4}", total / (step + 1) as f64));
            bar.inc(1);
        }
        bar.finish_and_clear();
        let acc = accuracy(&predict, &params, &data, &test, device)?;
        println!(
            "epoch {epoch:>2}: train loss {:.4}, test accuracy {:.1}%",
            total / steps_per_epoch as f64,
            acc * 100.0
        );
    }
    let acc = accuracy(&predict, &params, &data, &test, device)?;
    println!(
        "final test accuracy: {:.2}% ({} of {} held-out digits)",
        acc * 100.0,
        (acc * test.len() as f64).round(),
        test.len()
    );

    let traces = loss_and_grad
        .last_traces()
        .ok_or_else(|| anyhow!("no traces recorded"))?;
    if !opts.quiet_traces {
        println!(
            "\n=== forward execution trace (loss and saved residuals) ===\n{}",
            traces.forward.execution.print()
        );
        println!(
            "=== backward execution trace (gradients of {}) ===\n{}",
            traces.wrt.join(", "),
            traces.backward.execution.print()
        );
    }
    println!(
        "traced {} time(s) for {} training steps; total {:.1?}",
        loss_and_grad.cache_misses(),
        steps_per_epoch * opts.epochs,
        start.elapsed()
    );
    Ok(())
}
