//! Ordering with another library's stream (torch's current stream, from Python).
//!
//! Thunder enqueues all work of a device on its own stream (see the module docs), so a caller
//! that works on another stream of the same context hands that stream in and the two are
//! ordered with events, without the host waiting: [`wait_for_external`] before a run (thunder
//! reads inputs only after the caller's pending work on them), [`external_waits`] after it (the
//! caller's later work sees thunder's outputs). Passing the external stream to the plugins
//! instead would break the pool's rule that all work of a device is ordered on one stream.

use super::driver::{cuda_call_error, current};
use crate::Result;
use cudarc::driver::{result, sys};
use std::ffi::c_void;

/// Makes `waiter` wait, on the device, for the work enqueued so far on `signaller`.
fn order(signaller: sys::CUstream, waiter: sys::CUstream) -> Result<()> {
    let event = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
        .map_err(|e| cuda_call_error("cuEventCreate", e))?;
    // SAFETY: `event` was just created; both streams belong to the device's primary context
    // (the caller's contract for an external stream; 0 is the legacy default stream).
    let r = unsafe {
        result::event::record(event, signaller)
            .map_err(|e| cuda_call_error("cuEventRecord", e))
            .and_then(|()| {
                result::stream::wait_event(
                    waiter,
                    event,
                    sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
                .map_err(|e| cuda_call_error("cuStreamWaitEvent", e))
            })
    };
    // SAFETY: destroying an event that a stream still waits on is allowed; the driver frees it
    // once the wait completes.
    let d =
        unsafe { result::event::destroy(event) }.map_err(|e| cuda_call_error("cuEventDestroy", e));
    r.and(d)
}

/// Orders device `ordinal`'s thunder stream after the work enqueued so far on `external` (a
/// `CUstream` of the same device's primary context; null is the legacy default stream).
pub fn wait_for_external(ordinal: u32, external: *mut c_void) -> Result<()> {
    let rt = current(ordinal)?;
    order(external as sys::CUstream, rt.stream)
}

/// Orders `external` after the work enqueued so far on device `ordinal`'s thunder stream.
pub fn external_waits(ordinal: u32, external: *mut c_void) -> Result<()> {
    let rt = current(ordinal)?;
    order(rt.stream, external as sys::CUstream)
}
