//! CUDA graphs: capturing the work a program enqueues on a device's stream once, and replaying
//! it with one launch.
//!
//! A capture records the kernels, copies and memsets enqueued on the device's stream (by the
//! runtime and by every plugin, which all use that stream) instead of running them. Its
//! allocations come from an arena of its own (see [`crate::pool`]), kept by the graph as
//! [`GraphMemory`], because every replay reads and writes the same addresses.
//!
//! The capture is relaxed (`CU_STREAM_CAPTURE_MODE_RELAXED`): a plugin may load a module or a
//! pool may call `cuMemAlloc` while it lasts. Work of other threads on the same device would be
//! recorded into the graph, so while a thread captures a device, other threads wait in
//! [`crate::driver`]'s `current` before touching it.

use crate::driver::{cuda_call_error, current};
use crate::pool::{begin_arena, end_arena, GraphMemory};
use crate::{CudaError as Error, Result};
use cudarc::driver::{result, sys};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bit `d` is set while some thread captures device `d` (devices past 63 are never captured).
static CAPTURING: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static IS_CAPTURER: Cell<bool> = const { Cell::new(false) };
}

fn bit(ordinal: u32) -> Option<u64> {
    1u64.checked_shl(ordinal)
}

/// Blocks while another thread captures device `ordinal` (its work would join that graph).
pub(crate) fn wait_for_captures(ordinal: u32) {
    let Some(b) = bit(ordinal) else { return };
    while CAPTURING.load(Ordering::Acquire) & b != 0 && !IS_CAPTURER.with(Cell::get) {
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
}

/// A capture in progress on this thread. Dropping it unfinished ends the capture and throws
/// the recorded work away (nothing of it ran).
pub struct Capture {
    ordinal: u32,
    stream: sys::CUstream,
    open: bool,
}

/// Starts capturing device `ordinal`'s stream on this thread.
pub fn begin_capture(ordinal: u32) -> Result<Capture> {
    let b = bit(ordinal).ok_or_else(|| {
        Error::Usage(format!(
            "cuda:{ordinal}: graphs are captured on devices 0 to 63"
        ))
    })?;
    let stream = current(ordinal)?.stream;
    // One capture of a device at a time.
    while CAPTURING.fetch_or(b, Ordering::AcqRel) & b != 0 {
        std::thread::sleep(std::time::Duration::from_micros(20));
    }
    IS_CAPTURER.with(|c| c.set(true));
    begin_arena(ordinal);
    let capture = Capture {
        ordinal,
        stream,
        open: true,
    };
    // SAFETY: the device's own stream, with its context current on this thread.
    unsafe {
        result::stream::begin_capture(
            stream,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        )
    }
    .map_err(|e| cuda_call_error("cuStreamBeginCapture", e))?;
    Ok(capture)
}

impl Capture {
    /// Ends the capture and makes the recorded work launchable.
    pub fn finish(mut self) -> Result<CudaGraph> {
        let (graph, memory) = self.close();
        let graph = graph?;
        let memory = memory.ok_or_else(|| {
            Error::Usage("the capture's memory arena was lost (a nested capture?)".into())
        })?;
        // SAFETY: a graph just captured; it is destroyed once instantiated (the executable
        // graph does not need it).
        let exec = unsafe {
            let exec = result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0));
            let _ = result::graph::destroy(graph);
            exec
        }
        .map_err(|e| cuda_call_error("cuGraphInstantiate", e))?;
        Ok(CudaGraph {
            exec,
            ordinal: self.ordinal,
            memory: Arc::new(memory),
        })
    }

    /// Ends the capture (once): the graph, and the arena the capture allocated from.
    fn close(&mut self) -> (Result<sys::CUgraph>, Option<GraphMemory>) {
        self.open = false;
        // SAFETY: the stream this capture began on.
        let graph = unsafe { result::stream::end_capture(self.stream) }
            .map_err(|e| cuda_call_error("cuStreamEndCapture", e));
        let memory = end_arena();
        IS_CAPTURER.with(|c| c.set(false));
        if let Some(b) = bit(self.ordinal) {
            CAPTURING.fetch_and(!b, Ordering::AcqRel);
        }
        (graph, memory)
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if self.open {
            if let (Ok(graph), _) = self.close() {
                // SAFETY: a graph that was never instantiated.
                let _ = unsafe { result::graph::destroy(graph) };
            }
        }
    }
}

/// A captured graph, ready to launch on its device's stream, and the memory it uses.
pub struct CudaGraph {
    exec: sys::CUgraphExec,
    ordinal: u32,
    memory: Arc<GraphMemory>,
}

// SAFETY: an executable graph may be launched from any thread with its context current
// (`launch` makes it current); launches of one program are serialized by its caller.
unsafe impl Send for CudaGraph {}
unsafe impl Sync for CudaGraph {}

impl CudaGraph {
    /// Enqueues one replay on the device's stream.
    pub fn launch(&self) -> Result<()> {
        let stream = current(self.ordinal)?.stream;
        // SAFETY: an executable graph of this device, launched on its stream.
        unsafe { result::graph::launch(self.exec, stream) }
            .map_err(|e| cuda_call_error("cuGraphLaunch", e))
    }

    /// The blocks the graph reads and writes; outputs handed out of a replay hold it, so the
    /// blocks outlive the graph while those outputs live.
    pub fn memory(&self) -> &Arc<GraphMemory> {
        &self.memory
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: destroying an executable graph that may still run is allowed: the driver
        // frees it when the launch completes.
        let _ = unsafe { result::graph::exec_destroy(self.exec) };
    }
}
