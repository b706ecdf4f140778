//! A team for stages too short for rayon: the calling thread and helper threads that spin
//! between jobs, so that a 20-50 us product can be cut in two and still gain.
//!
//! Why not rayon: the host calls a region from a thread outside rayon's pool, so a parallel
//! loop injects its work into the pool, wakes a parked worker, and puts the calling thread to
//! sleep until the workers are done; on the 2-core Firecracker VM the wake-ups cost 15-20 us
//! each way, and a 256x128x128 product (about 40 us on one core) took 80-100 us on two. Here
//! the calling thread does its share itself, the helpers claim the other parts as they come,
//! and a helper that is late (parked, or its core taken by another process) costs nothing but
//! its share: the caller claims every part no helper has taken. Helpers spin for [`SPIN`]
//! after each job (like OpenMP's block time, which PyTorch's eager ops rely on), then park.
//!
//! One caller at a time: a second thread calling [`run`] while the team is busy (tests run in
//! parallel) runs its parts itself, as do a part that calls [`run`] again and a rayon worker.
//!
//! On the Xeon VM (real-time priority, `THUNDER_CPU_SIMD_TEAM=0` against 1, interleaved) the
//! MLP train step's products on the team took its step from a median of about 343 us to 323.
//! Under load from other processes a pure spin made it 1.5-2x slower (a helper spinning on
//! the core the caller needed), hence the yields after [`PAUSE`].

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long a helper spins for its next job before it parks: long enough to span the
/// serial stages between two team stages of a region and the host's work between the regions
/// of a training step (tens of microseconds), short enough not to hold a core for long after
/// the last region.
const SPIN: Duration = Duration::from_micros(300);

/// How long a helper spins on `pause` alone before it starts yielding between checks.
const PAUSE: Duration = Duration::from_micros(20);

const IDLE: u32 = 0;
const POSTED: u32 = 1;
const RUNNING: u32 = 2;
const DONE: u32 = 3;

/// One job: parts `0..parts`, claimed one by one from `next`.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
    next: AtomicUsize,
    parts: usize,
    /// Set when a part panicked on a helper (the caller panics in turn).
    panicked: AtomicBool,
}

impl Job<'_> {
    fn work(&self) {
        loop {
            let p = self.next.fetch_add(1, Ordering::Relaxed);
            if p >= self.parts {
                return;
            }
            (self.f)(p);
        }
    }
}

/// A helper's mailbox: the caller posts a job, the helper takes it (POSTED -> RUNNING) or
/// the caller takes it back (POSTED -> IDLE), and the helper reports DONE.
struct Slot {
    state: AtomicU32,
    /// The posted job, type-erased; valid while `state` is POSTED or RUNNING.
    job: UnsafeCell<*const Job<'static>>,
    parked: AtomicBool,
}

// SAFETY: `job` is written by the caller only while the slot is IDLE (no helper reads it) and
// read by the helper only after it won the POSTED -> RUNNING exchange; the caller waits for
// DONE before the job goes out of scope.
unsafe impl Sync for Slot {}
unsafe impl Send for Slot {}

struct Helper {
    slot: Arc<Slot>,
    thread: std::thread::Thread,
}

struct Team {
    helpers: Vec<Helper>,
    busy: AtomicBool,
}

thread_local! {
    /// Whether this thread is running parts of a job (nested calls run serially).
    static INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn team() -> &'static Team {
    static TEAM: OnceLock<Team> = OnceLock::new();
    TEAM.get_or_init(|| {
        // Asking rayon for its size builds its global pool: build it with flushing workers
        // first (`ftz.rs`), as a region's compile does.
        crate::ftz::init_pool();
        let threads = rayon::current_num_threads();
        let helpers = (1..threads)
            .filter_map(|i| {
                let slot = Arc::new(Slot {
                    state: AtomicU32::new(IDLE),
                    job: UnsafeCell::new(std::ptr::null()),
                    parked: AtomicBool::new(false),
                });
                let mine = slot.clone();
                std::thread::Builder::new()
                    .name(format!("cpu-simd-team-{i}"))
                    .spawn(move || helper_loop(&mine))
                    .ok()
                    .map(|h| Helper {
                        slot,
                        thread: h.thread().clone(),
                    })
            })
            .collect();
        Team {
            helpers,
            busy: AtomicBool::new(false),
        }
    })
}

/// The number of threads a job may run on (the caller and the helpers).
pub(crate) fn threads() -> usize {
    team().helpers.len() + 1
}

/// Whether a job run from this thread now would get helpers: the team is on
/// (`THUNDER_CPU_SIMD_TEAM=0` turns it off, for A/B runs), has helpers, and this thread is
/// neither a rayon worker nor running a part of a job (then the cores are taken).
pub(crate) fn usable() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    crate::switches::once("THUNDER_CPU_SIMD_TEAM", &ON)
        && !INSIDE.with(|c| c.get())
        && rayon::current_thread_index().is_none()
        && !team().helpers.is_empty()
}

/// Step `step` of a wait begun at `since`: a spin hint for the first [`PAUSE`], then the core
/// given to any other runnable thread (the clock read every 64th step).
pub(crate) fn pause(since: Instant, step: u32) {
    if step.is_multiple_of(64) && since.elapsed() > PAUSE {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

fn helper_loop(slot: &Slot) {
    crate::ftz::worker_start();
    INSIDE.with(|c| c.set(true));
    let mut idle_since = Instant::now();
    let mut spins = 0u32;
    loop {
        if slot.state.load(Ordering::Acquire) == POSTED
            && slot
                .state
                .compare_exchange(POSTED, RUNNING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            // SAFETY: the exchange made this helper the job's only other reader until DONE.
            let job = unsafe { &**slot.job.get() };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.work())).is_err() {
                job.panicked.store(true, Ordering::Relaxed);
            }
            slot.state.store(DONE, Ordering::Release);
            idle_since = Instant::now();
            continue;
        }
        spins = spins.wrapping_add(1);
        if !spins.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        let idle = idle_since.elapsed();
        if idle > PAUSE && idle <= SPIN {
            // Past the first microseconds, give the core away between checks: when another
            // process holds the other core, the caller may be waiting for this one.
            std::thread::yield_now();
        } else if idle > SPIN {
            slot.parked.store(true, Ordering::SeqCst);
            // A job posted before `parked` was seen is caught here; one posted after finds
            // `parked` set and unparks (an unpark before the park makes it return at once).
            if slot.state.load(Ordering::SeqCst) != POSTED {
                std::thread::park();
            }
            slot.parked.store(false, Ordering::SeqCst);
            idle_since = Instant::now();
        }
    }
}

/// Runs `f(0)`, ..., `f(parts - 1)` on the calling thread and the team's helpers; returns
/// when all have run. Parts may run in any order and concurrently.
pub(crate) fn run(parts: usize, f: &(dyn Fn(usize) + Sync)) {
    let team = team();
    // Inside rayon's pool (a batch of products spread over the workers) the cores are taken.
    let nested = INSIDE.with(|c| c.get()) || rayon::current_thread_index().is_some();
    if parts < 2
        || team.helpers.is_empty()
        || nested
        || team
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        (0..parts).for_each(f);
        return;
    }
    let job = Job {
        f,
        next: AtomicUsize::new(0),
        parts,
        panicked: AtomicBool::new(false),
    };
    let helpers = &team.helpers[..team.helpers.len().min(parts - 1)];
    for h in helpers {
        // SAFETY: the slot is IDLE, so no helper reads `job`; the pointer is only used
        // while this function waits below, so erasing the lifetime is sound.
        unsafe { *h.slot.job.get() = (&job as *const Job<'_>).cast::<Job<'static>>() };
        h.slot.state.store(POSTED, Ordering::SeqCst);
        if h.slot.parked.load(Ordering::SeqCst) {
            h.thread.unpark();
        }
    }
    INSIDE.with(|c| c.set(true));
    let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.work()));
    INSIDE.with(|c| c.set(false));
    for h in helpers {
        if h.slot
            .state
            .compare_exchange(POSTED, IDLE, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            continue;
        }
        let since = Instant::now();
        let mut spins = 0u32;
        while h.slot.state.load(Ordering::Acquire) != DONE {
            spins = spins.wrapping_add(1);
            // A helper this late was likely preempted: let it have this core if it is
            // waiting for one.
            pause(since, spins);
        }
        h.slot.state.store(IDLE, Ordering::Release);
    }
    team.busy.store(false, Ordering::Release);
    if let Err(p) = mine {
        std::panic::resume_unwind(p);
    }
    if job.panicked.load(Ordering::Relaxed) {
        panic!("cpu-simd: a part of a team job panicked on a helper thread");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_runs_once() {
        for parts in [0, 1, 2, 3, 7, 64] {
            let hits: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
            run(parts, &|p| {
                hits[p].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "{parts} parts"
            );
        }
    }

    #[test]
    fn concurrent_and_nested_callers_finish() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        run(3, &|_| {
                            run(2, &|_| {
                                total.fetch_add(1, Ordering::Relaxed);
                            });
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 4 * 200 * 3 * 2);
    }

    #[test]
    fn a_helper_that_parked_is_woken() {
        let n = AtomicUsize::new(0);
        run(2, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        // Long enough for the helpers to park.
        std::thread::sleep(SPIN * 3);
        run(4, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 6);
    }
}
