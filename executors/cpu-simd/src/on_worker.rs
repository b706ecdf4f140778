//! Heavy regions run their stages on a rayon worker.
//!
//! The host calls a region from a thread outside rayon's pool. Each parallel loop of a stage
//! started there injects its work into the pool, wakes the parked workers and puts the
//! calling thread to sleep until they are done; ResNet-50 b1 has about a hundred such loops a
//! forward, and the wake-ups (15-20 us each way on these VMs) showed up as 6% of its samples
//! in the kernel's scheduler. Started on a worker instead, the region's loops split their
//! work by stealing: the other workers are still spinning from the loop before, and the
//! calling thread sleeps once, for the whole region.
//!
//! Only for regions whose products (GEMMs, convolutions) add up to [`MIN_FLOPS`]: handing the
//! region over costs a wake-up, which a region of a few microseconds would feel, and the
//! short products of small regions run on `team.rs`'s helpers, which a rayon worker does not
//! use.
//!
//! Measured (AMD EPYC Zen 5, 2 threads, `onnx_bench` medians, 4 alternating rounds against
//! `THUNDER_CPU_SIMD_ON_WORKER=0`): ResNet-50 b1 22.8-23.4 ms against 23.8-24.4; a first
//! version (the same move through `rayon::in_place_scope`): ResNet-50 b1 22.7-23.1 against
//! 24.0-24.4, GPT-2 b1 75.1-75.5 against 76.1-77.2, ResNet-50 b8 and MiniLM b8 unchanged.
//! Every region on a worker (a threshold of 0) took `thunder bench`'s MLP train step from
//! 154 us to 335 (its products lost the team) and left the GPT-2 block as it was (4.53
//! against 4.60 ms).

use crate::stages::Stage;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Fewest product FLOPs (`2 m n k` summed over a region's GEMMs and convolutions) for a
/// region to run on a worker.
///
/// Lowered from 1e9 once the other workers linger in the region ([`linger`]): `thunder
/// bench`'s GPT-2 block (regions of 0.4 and 0.8 GFLOP) then ran 14.1-15.7 ms (medians)
/// against 15.4-16.3 with 1e9, 4 rounds alternating on the Zen 3 guest; the MLP step's
/// regions (about 0.01 GFLOP) stay on the calling thread and its team.
pub(crate) const MIN_FLOPS: f64 = 3e8;

/// `2 m n k` summed over the GEMM and convolution stages.
pub(crate) fn product_flops(stages: &[Stage]) -> f64 {
    stages
        .iter()
        .map(|s| match s {
            Stage::Gemm(g) => gemm_flops(g),
            Stage::GemmPair(p) => gemm_flops(&p.0) + gemm_flops(&p.1),
            Stage::Conv(c) => {
                let out: usize = c.out_shape.iter().product();
                let depth: usize = c.w_shape[1..].iter().product();
                2.0 * out as f64 * depth as f64
            }
            _ => 0.0,
        })
        .sum()
}

fn gemm_flops(g: &crate::stages::GemmPlan) -> f64 {
    2.0 * g.batch.iter().product::<usize>() as f64 * g.m as f64 * g.n as f64 * g.k as f64
}

/// Whether a region with `flops` of products runs on a worker: enough work (at least
/// [`MIN_FLOPS`], or `THUNDER_CPU_SIMD_ON_WORKER_MIN=FLOPS`; `THUNDER_CPU_SIMD_ON_WORKER=0`
/// never), more than one thread, and called from outside the pool. Read once: a cached call
/// of a tiny region pays one comparison.
pub(crate) fn applies(flops: f64) -> bool {
    static MIN: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let min = *MIN.get_or_init(|| {
        if std::env::var("THUNDER_CPU_SIMD_ON_WORKER").as_deref() == Ok("0") {
            return f64::INFINITY;
        }
        std::env::var("THUNDER_CPU_SIMD_ON_WORKER_MIN")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(MIN_FLOPS)
    });
    flops >= min && rayon::current_num_threads() > 1 && rayon::current_thread_index().is_none()
}

/// A job that borrows the region and its buffers (raw pointers, shared with the workers as
/// every parallel loop of the stages already does).
struct Job<F>(F);
// SAFETY: the closure reads the compiled region and the call's buffers, which the stages'
// parallel loops hand to the workers in any case; the calling thread blocks until it is done.
unsafe impl<F> Send for Job<F> {}

/// Runs `f` on a worker of rayon's pool and waits for it; with the calling thread's flush
/// bits (a worker's own are set for products, `ftz.rs`), so the stages see the state they
/// would see on the calling thread. A panic in `f` resumes on the calling thread.
///
/// While `f` runs, the pool's other workers [`linger`] in it rather than park between its
/// parallel loops (`THUNDER_CPU_SIMD_LINGER=0` lets them park, for A/B runs).
pub(crate) fn run<R: Send>(f: impl FnOnce() -> R) -> R {
    run_lingering(f, lingering())
}

/// [`run`], with the other workers lingering or not.
pub(crate) fn run_lingering<R: Send>(f: impl FnOnce() -> R, lingering: bool) -> R {
    let bits = crate::ftz::current_bits();
    let job = Job(f);
    let done = AtomicBool::new(false);
    let done = &done;
    rayon::scope(move |s| {
        let job = job;
        // Set however `f` ends (a panic included), or the lingering workers would keep the
        // scope open.
        let _finish = Finish(done);
        let _owner = Occupied::enter();
        if lingering {
            let owner = rayon::current_thread_index();
            s.spawn_broadcast(move |_, _| linger(done, owner));
        }
        let _state = crate::ftz::FlushGuard::with_bits(bits);
        (job.0)()
    })
}

thread_local! {
    /// Whether this thread runs a region on a worker or lingers for one.
    static OCCUPIED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread [`OCCUPIED`] until dropped (then restores what it was).
struct Occupied(bool);

impl Occupied {
    fn enter() -> Occupied {
        Occupied(OCCUPIED.with(|o| o.replace(true)))
    }
}

impl Drop for Occupied {
    fn drop(&mut self) {
        OCCUPIED.with(|o| o.set(self.0));
    }
}

/// Whether a parallel loop started on this thread now is split among workers that linger in
/// a region (this thread runs it, or lingers for it): then a split costs a few microseconds,
/// about what the team's hand-off costs on the calling thread, rather than a wake-up, so
/// groups of the team's sizes split too (`exec.rs`). `THUNDER_CPU_SIMD_LINGER_SPLIT=0` keeps
/// them on one thread (for A/B runs).
pub(crate) fn cheap_split() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    OCCUPIED.with(|o| o.get())
        && lingering()
        && crate::switches::once("THUNDER_CPU_SIMD_LINGER_SPLIT", &ON)
}

/// Sets its flag when dropped.
struct Finish<'a>(&'a AtomicBool);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Whether workers linger while a region runs on one of them.
fn lingering() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    crate::switches::once("THUNDER_CPU_SIMD_LINGER", &ON)
}

/// Keeps a worker taking the region's work until `done`: rayon parks a worker within tens of
/// microseconds of finding no work, and a parked worker's wake-up set the pace of short
/// parallel loops. On a 2-core AMD EPYC Zen 3 KVM guest (`linger_bench`), a `join` of two
/// 400 us halves after 50-300 us of serial work on the worker cost 44-101 us more than a
/// half (median; p90 101-146) with parked workers, and 2.4-3.3 us with lingering ones. The
/// worker that runs the region returns at once (it would otherwise stall a wait of its own
/// until `done`).
///
/// Only a worker at rest lingers: not the one running the region, nor one that runs another
/// region or lingers for one. Such a worker may hold another region's continuation on its
/// stack (its `join` waits found this job), and two workers each lingering for the region the
/// other one holds would wait on each other for ever.
fn linger(done: &AtomicBool, owner: Option<usize>) {
    if rayon::current_thread_index() == owner || OCCUPIED.with(|o| o.get()) {
        return;
    }
    let _lingering = Occupied::enter();
    let mut idle: Option<(Instant, u32)> = None;
    while !done.load(Ordering::Acquire) {
        if let Some(rayon::Yield::Executed) = rayon::yield_now() {
            idle = None;
            continue;
        }
        // Past a short spin, give the core to any other runnable thread between checks, as
        // the team's caller does: a process beside us should not lose a core to our wait.
        let (since, steps) = idle.get_or_insert_with(|| (Instant::now(), 0));
        *steps = steps.wrapping_add(1);
        crate::team::pause(*since, *steps);
    }
}
