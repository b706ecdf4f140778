//! Environment switches for A/B runs of one kernel choice against another. Each is on unless
//! its variable is `0` ([`forced`]: `0` off, `1` on, otherwise the CPU's default), read once
//! per process; under test it is read on every call instead, so that a benchmark
//! (`conv_bench`'s `CONV_BENCH_AB`, say) can alternate it between calls in one process, where
//! both arms see the same load on a shared machine.

use std::sync::OnceLock;

/// Whether the switch `var` is on (its value is not `0`), the first reading kept in `kept`
/// (each switch its own cell).
pub(crate) fn on(var: &str, kept: &OnceLock<bool>) -> bool {
    per_call_under_test(kept, || read(var))
}

/// [`on`], but read once under test too: for switches consulted too often (per tile) to read
/// the environment each time, or that benchmarks do not alternate.
pub(crate) fn once(var: &str, kept: &OnceLock<bool>) -> bool {
    *kept.get_or_init(|| read(var))
}

fn read(var: &str) -> bool {
    std::env::var(var).as_deref() != Ok("0")
}

/// A switch with three positions, for a kernel that is on by default on some CPUs only:
/// `Some(false)` when `var` is `0`, `Some(true)` when it is `1`, `None` (the default) when it
/// is unset or anything else. Read as [`on`] reads: per call under test, once otherwise.
pub(crate) fn forced(var: &str, kept: &OnceLock<Option<bool>>) -> Option<bool> {
    per_call_under_test(kept, || match std::env::var(var).as_deref() {
        Ok("0") => Some(false),
        Ok("1") => Some(true),
        _ => None,
    })
}

/// `read()` on every call under test, its first value kept in `kept` otherwise.
fn per_call_under_test<T: Copy>(kept: &OnceLock<T>, read: impl FnOnce() -> T) -> T {
    if cfg!(test) {
        return read();
    }
    *kept.get_or_init(read)
}
