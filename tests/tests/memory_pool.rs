//! The host's caching allocator (`thunder_core::runtime::pool`): compiled programs called in a
//! loop reach a steady state where no call takes memory from the system, threads share it
//! safely, the cap on cached bytes holds, and plugins' `HostServices::alloc` uses it too.
//!
//! The pool is process-wide, so the tests of this file take a lock and run one at a time (other
//! test binaries are other processes, with their own pools).

use std::sync::{Mutex, MutexGuard, PoisonError};
use thunder_core::autograd::value_and_grad;
use thunder_core::device::Device;
use thunder_core::runtime::pool;
use thunder_core::{jit_with, Array, DType, Tensor};
use thunder_tests::interpreter_host;
use thunder_torch::prelude::*;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn chain(xs: &[Tensor]) -> Vec<Tensor> {
    let mut x = xs[0].clone();
    for _ in 0..4 {
        x = (&x * 1.01 + 0.1).tanh();
    }
    vec![x]
}

fn chain_reference(x: f32) -> f32 {
    let mut x = x;
    for _ in 0..4 {
        x = (x * 1.01 + 0.1).tanh();
    }
    x
}

#[test]
fn steady_state_calls_take_no_memory_from_the_system() {
    let _serial = serial();
    let f = jit_with(interpreter_host(), chain);
    let x = Array::random(&[4096], DType::F32, 0).unwrap();
    let inputs = vec![x.clone()];
    for _ in 0..3 {
        f.call(&inputs).unwrap();
    }
    let before = pool::stats();
    for _ in 0..100 {
        let out = f.call(&inputs).unwrap();
        assert_eq!(out[0].numel(), 4096);
    }
    let after = pool::stats();
    assert_eq!(
        after.misses, before.misses,
        "steady-state calls allocated from the system: {before:?} -> {after:?}"
    );
    assert!(after.hits >= before.hits + 100, "{before:?} -> {after:?}");
    assert_eq!(after.in_use_bytes, before.in_use_bytes);

    // Reused buffers hold the right values (nothing stale shows through).
    let want: Vec<f32> = x
        .to_vec::<f32>()
        .unwrap()
        .into_iter()
        .map(chain_reference)
        .collect();
    let got = f.call(&inputs).unwrap()[0].to_vec::<f32>().unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5, "got {g}, want {w}");
    }
}

#[test]
fn steady_state_training_steps_take_no_memory_from_the_system() {
    let _serial = serial();
    // Forward and backward programs with several outputs and saved residuals.
    let loss_and_grad = value_and_grad(Some(interpreter_host()), |xs: &[Tensor]| {
        let h = xs[2].linear(&xs[0], Some(&xs[1])).relu();
        vec![h.sum(None, false)]
    });
    let w = Array::random(&[32, 16], DType::F32, 1)
        .unwrap()
        .with_requires_grad(true);
    let b = Array::random(&[32], DType::F32, 2)
        .unwrap()
        .with_requires_grad(true);
    let x = Array::random(&[64, 16], DType::F32, 3).unwrap();
    let inputs = vec![w, b, x];
    for _ in 0..3 {
        loss_and_grad.call(&inputs).unwrap();
    }
    let before = pool::stats();
    for _ in 0..50 {
        let (loss, grads) = loss_and_grad.call(&inputs).unwrap();
        assert_eq!((loss.len(), grads.len()), (1, 2));
    }
    let after = pool::stats();
    assert_eq!(after.misses, before.misses, "{before:?} -> {after:?}");
    assert_eq!(after.in_use_bytes, before.in_use_bytes);
}

#[test]
fn threads_call_one_program_concurrently() {
    let _serial = serial();
    let f = jit_with(interpreter_host(), chain);
    let inputs: Vec<Array> = (0..4)
        .map(|t| Array::random(&[3000 + 100 * t], DType::F32, t as u64).unwrap())
        .collect();
    let in_use = pool::stats().in_use_bytes;
    std::thread::scope(|s| {
        for x in &inputs {
            let f = &f;
            s.spawn(move || {
                let want: Vec<f32> = x
                    .to_vec::<f32>()
                    .unwrap()
                    .into_iter()
                    .map(chain_reference)
                    .collect();
                for _ in 0..100 {
                    let out = f.call(std::slice::from_ref(x)).unwrap();
                    let got = out[0].to_vec::<f32>().unwrap();
                    assert_eq!(got.len(), want.len());
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - w).abs() <= 1e-5, "got {g}, want {w}");
                    }
                }
            });
        }
    });
    assert_eq!(pool::stats().in_use_bytes, in_use);
}

#[test]
fn cached_bytes_stay_under_the_cap() {
    let _serial = serial();
    let old_cap = pool::cap();
    let f = jit_with(interpreter_host(), chain);
    // 1 MiB outputs against a 256 KiB cap: freed outputs go back to the system.
    let x = Array::random(&[1 << 18], DType::F32, 0).unwrap();
    pool::set_cap(256 << 10);
    assert!(pool::stats().cached_bytes <= 256 << 10);
    let before = pool::stats();
    for _ in 0..5 {
        f.call(std::slice::from_ref(&x)).unwrap();
        assert!(pool::stats().cached_bytes <= 256 << 10);
    }
    let after = pool::stats();
    assert!(
        after.releases >= before.releases + 5,
        "{before:?} -> {after:?}"
    );
    assert!(after.misses >= before.misses + 5, "{before:?} -> {after:?}");

    // With room again, the same calls reuse their blocks.
    pool::set_cap(old_cap);
    f.call(std::slice::from_ref(&x)).unwrap();
    let before = pool::stats();
    for _ in 0..5 {
        f.call(std::slice::from_ref(&x)).unwrap();
    }
    assert_eq!(pool::stats().misses, before.misses);

    pool::trim();
    let s = pool::stats();
    assert_eq!(s.cached_bytes, 0);
    assert_eq!(s.system_bytes, s.in_use_bytes);
}

#[test]
fn plugin_allocations_come_from_the_pool() {
    let _serial = serial();
    let services = thunder_core::host::services::host_services();
    let cpu = Device::Cpu.to_desc();
    let p = (services.alloc)(cpu, 3000, 64);
    assert!(!p.is_null() && (p as usize).is_multiple_of(64));
    (services.free)(cpu, p, 3000, 64);
    let before = pool::stats();
    let q = (services.alloc)(cpu, 3000, 32);
    assert_eq!(q, p, "a freed block of the same size class is reused");
    assert_eq!(pool::stats().hits, before.hits + 1);
    (services.free)(cpu, q, 3000, 32);
    // Zero bytes: a dangling aligned pointer, nothing allocated.
    let z = (services.alloc)(cpu, 0, 64);
    assert!(!z.is_null() && (z as usize).is_multiple_of(64));
    (services.free)(cpu, z, 0, 64);
    assert_eq!(pool::stats().misses, before.misses);
    // Alignments beyond the pool's go to the system allocator.
    let big = (services.alloc)(cpu, 100, 4096);
    assert!(!big.is_null() && (big as usize).is_multiple_of(4096));
    (services.free)(cpu, big, 100, 4096);
}
