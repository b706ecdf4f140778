//! Replaying a compiled CUDA program as one CUDA graph launch.
//!
//! A program whose every value lives on one CUDA device enqueues all of its work on that
//! device's stream, so the whole run can be captured once and replayed with one
//! `cuGraphLaunch`: the host's cost per call drops from one plugin call (and its launches) per
//! region to a few driver calls.
//!
//! A graph reads and writes fixed addresses, which sets the rules:
//! - **Inputs.** Calls run as usual (at least [`WARM_UP_RUNS`]) until two calls in a row pass
//!   their large inputs at the same addresses (a model's parameters, the residuals of a
//!   forward that is itself replayed); the second of them captures. Inputs whose address moved between those calls and that are
//!   small (token ids, a loss's cotangent) get a buffer of the graph's own, copied into before
//!   each replay; the others are read in place, and a later call that passes one elsewhere runs
//!   as usual and starts the wait again (at most [`MAX_CAPTURES`] captures a program).
//! - **Intermediates** live in the capture's arena ([`cuda::GraphMemory`]), reused by every
//!   replay.
//! - **Outputs.** Small ones are copied into fresh buffers after each replay, so callers may
//!   keep them (a loss). Large ones, and those the caller marks as released before its next
//!   call (a forward's residuals), are handed out in the graph's memory; the next replay writes
//!   them again, so a call made while any of them is still held runs as usual instead.
//!
//! A capture that fails (a plugin that synchronizes or reads back during its run, say) turns
//! replay off for the program, which then runs as compiled; the failure is logged.

use super::array::{Array, Watch};
use super::program::CompiledProgram;
use crate::cuda;
use crate::error::{Error, Result};
use crate::ir::TensorType;
use std::sync::{Mutex, PoisonError};

/// Inputs up to this size may move between calls: a capture gives them a buffer of its own.
const MOVABLE_INPUT_BYTES: usize = 16 << 20;
/// Outputs up to this size are copied out of the graph's memory after each replay.
const COPIED_OUTPUT_BYTES: usize = 1 << 20;
/// Captures a program may make before it stops trying (its inputs keep moving).
const MAX_CAPTURES: u64 = 4;
/// Calls run as compiled before the first capture: plugins may set things up on a first or
/// second run (cuda-kernels' error flags, library handles), and what a capture allocates
/// belongs to the graph, so that must be done by then.
const WARM_UP_RUNS: u64 = 2;

/// What graph replay did for one program, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraphStats {
    /// Captures made (each followed by a launch of the captured graph).
    pub captures: u64,
    /// Calls served by launching a captured graph, captures included.
    pub graph_runs: u64,
    /// Calls run region by region: before a capture, when inputs moved, when outputs of the
    /// last replay were still held, or after replay was turned off.
    pub eager_runs: u64,
    /// Replay was turned off for this program (a capture failed, or too many were made).
    pub off: bool,
}

pub(crate) struct Replay {
    ordinal: u32,
    /// Outputs from this index on are handed out in the graph's memory whatever their size
    /// (see [`super::CompiledProgram::keep_outputs_in_graph`]).
    in_place_from: usize,
    state: Mutex<State>,
}

struct State {
    phase: Phase,
    stats: GraphStats,
}

enum Phase {
    /// Running as compiled, remembering the last call's input addresses.
    Waiting {
        last: Option<Vec<u64>>,
    },
    Ready(Box<Captured>),
    Off,
}

struct Captured {
    graph: cuda::CudaGraph,
    inputs: Vec<InputSeat>,
    outputs: Vec<OutputSeat>,
    /// The large outputs handed out by the last launch.
    handed: Vec<Watch>,
}

enum InputSeat {
    /// The graph reads the caller's buffer at this address.
    InPlace(u64),
    /// The graph reads this buffer, which each call's input is copied into.
    Copied(Array),
}

enum OutputSeat {
    /// The output is input `i` itself.
    Input(usize),
    /// The output is the graph's buffer at `ptr`; `copied` ones are copied out.
    Graph {
        ptr: u64,
        ty: TensorType,
        copied: bool,
    },
}

/// Which inputs a capture gives a buffer of its own: those whose address moved since the last
/// call. `None` while a large input moved (the caller's addresses have not settled).
pub(crate) fn movable_inputs(last: &[u64], now: &[u64], bytes: &[usize]) -> Option<Vec<bool>> {
    if last.len() != now.len() || now.len() != bytes.len() {
        return None;
    }
    let moved: Vec<bool> = last.iter().zip(now).map(|(a, b)| a != b).collect();
    let settled = moved
        .iter()
        .zip(bytes)
        .all(|(&m, &b)| !m || b <= MOVABLE_INPUT_BYTES);
    settled.then_some(moved)
}

impl Replay {
    pub(crate) fn new(ordinal: u32, in_place_from: usize) -> Replay {
        Replay {
            ordinal,
            in_place_from,
            state: Mutex::new(State {
                phase: Phase::Waiting { last: None },
                stats: GraphStats::default(),
            }),
        }
    }

    pub(crate) fn stats(&self) -> GraphStats {
        self.lock().stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `program` on `inputs` from a graph when it can; `None` when this call is to run as
    /// compiled (the caller does that, with its usual error handling). Calls of one program
    /// are serialized here.
    pub(crate) fn try_run(
        &self,
        program: &CompiledProgram,
        inputs: &[Array],
    ) -> Result<Option<Vec<Array>>> {
        let mut guard = self.lock();
        let st = &mut *guard;
        let ptrs: Vec<u64> = inputs.iter().map(|a| a.data_ptr() as u64).collect();
        let next = match &mut st.phase {
            Phase::Off => None,
            Phase::Ready(c) if !c.accepts(&ptrs) => Some(Phase::Waiting { last: Some(ptrs) }),
            Phase::Ready(c) if c.handed.iter().any(Watch::alive) => None,
            Phase::Ready(c) => {
                let outs = c.replay(self.ordinal, inputs)?;
                st.stats.graph_runs += 1;
                return Ok(Some(outs));
            }
            Phase::Waiting { last } => {
                let bytes: Vec<usize> = inputs.iter().map(|a| a.ty().size_bytes()).collect();
                let movable = last
                    .as_deref()
                    .and_then(|l| movable_inputs(l, &ptrs, &bytes));
                *last = Some(ptrs);
                match movable {
                    None => None,
                    Some(_) if st.stats.eager_runs < WARM_UP_RUNS => None,
                    Some(_) if st.stats.captures >= MAX_CAPTURES => {
                        tracing::info!(
                            "not replaying this program as a CUDA graph any more: its inputs \
                             moved after {MAX_CAPTURES} captures"
                        );
                        st.stats.off = true;
                        Some(Phase::Off)
                    }
                    Some(movable) => {
                        st.stats.captures += 1;
                        let plan = Plan {
                            ordinal: self.ordinal,
                            movable: &movable,
                            in_place_from: self.in_place_from,
                        };
                        match capture(&plan, program, inputs) {
                            Ok((captured, outs)) => {
                                st.phase = Phase::Ready(Box::new(captured));
                                st.stats.graph_runs += 1;
                                return Ok(Some(outs));
                            }
                            Err(e) => {
                                tracing::warn!(
                                    "not replaying this program as a CUDA graph: its capture \
                                     failed: {e}"
                                );
                                st.stats.off = true;
                                Some(Phase::Off)
                            }
                        }
                    }
                }
            }
        };
        if let Some(phase) = next {
            st.phase = phase;
        }
        st.stats.eager_runs += 1;
        Ok(None)
    }
}

/// How a capture treats inputs and outputs.
struct Plan<'a> {
    ordinal: u32,
    /// Inputs read through a buffer of the graph's own.
    movable: &'a [bool],
    /// Outputs from this index on are never copied out.
    in_place_from: usize,
}

/// Captures one run of `program` on `inputs` as `plan` says and launches it: the graph and
/// this call's outputs.
fn capture(
    plan: &Plan<'_>,
    program: &CompiledProgram,
    inputs: &[Array],
) -> Result<(Captured, Vec<Array>)> {
    let ordinal = plan.ordinal;
    let mut seats = Vec::with_capacity(inputs.len());
    let mut read = Vec::with_capacity(inputs.len());
    for (a, &m) in inputs.iter().zip(plan.movable) {
        if m {
            let own = Array::reused(a.ty().clone())?;
            copy(ordinal, &own, a.data_ptr() as u64)?;
            seats.push(InputSeat::Copied(own.clone()));
            read.push(own);
        } else {
            seats.push(InputSeat::InPlace(a.data_ptr() as u64));
            read.push(a.clone());
        }
    }
    let capture = cuda::begin_capture(ordinal)?;
    let outs = program
        .run_steps_for_capture(&read)
        .map_err(|e| Error::Usage(format!("a region failed while captured: {e}")))?;
    let outputs = outs
        .iter()
        .enumerate()
        .map(|(k, o)| {
            let ptr = o.data_ptr() as u64;
            let bytes = o.ty().size_bytes();
            match read
                .iter()
                .position(|r| ptr != 0 && r.data_ptr() as u64 == ptr)
            {
                Some(i) => OutputSeat::Input(i),
                None => OutputSeat::Graph {
                    ptr,
                    ty: o.ty().clone(),
                    // Empty outputs have no block to point into.
                    copied: bytes == 0 || (k < plan.in_place_from && bytes <= COPIED_OUTPUT_BYTES),
                },
            }
        })
        .collect();
    // Dropped while the capture's arena is open, so their blocks go back to it.
    drop(outs);
    let graph = capture.finish()?;
    graph.launch()?;
    let mut captured = Captured {
        graph,
        inputs: seats,
        outputs,
        handed: Vec::new(),
    };
    let outs = captured.hand_out(ordinal, inputs)?;
    Ok((captured, outs))
}

/// Copies `dst`'s size in bytes from device address `src` into `dst`, in stream order.
fn copy(ordinal: u32, dst: &Array, src: u64) -> Result<()> {
    cuda::copy_d2d(ordinal, dst.data_ptr() as u64, src, dst.ty().size_bytes()).map_err(Error::from)
}

impl Captured {
    /// Whether the inputs the graph reads in place are at the addresses it reads.
    fn accepts(&self, ptrs: &[u64]) -> bool {
        self.inputs.iter().zip(ptrs).all(|(seat, &p)| match seat {
            InputSeat::InPlace(at) => *at == p,
            InputSeat::Copied(_) => true,
        })
    }

    fn replay(&mut self, ordinal: u32, inputs: &[Array]) -> Result<Vec<Array>> {
        for (seat, a) in self.inputs.iter().zip(inputs) {
            if let InputSeat::Copied(own) = seat {
                copy(ordinal, own, a.data_ptr() as u64)?;
            }
        }
        self.graph.launch()?;
        self.hand_out(ordinal, inputs)
    }

    /// The outputs of the launch just enqueued.
    fn hand_out(&mut self, ordinal: u32, inputs: &[Array]) -> Result<Vec<Array>> {
        self.handed.clear();
        let mut outs = Vec::with_capacity(self.outputs.len());
        for seat in &self.outputs {
            let out = match seat {
                OutputSeat::Input(i) => inputs[*i].clone(),
                OutputSeat::Graph {
                    ptr,
                    ty,
                    copied: true,
                } => {
                    let out = Array::reused(ty.clone())?;
                    copy(ordinal, &out, *ptr)?;
                    out
                }
                OutputSeat::Graph { ptr, ty, .. } => {
                    let memory = self.graph.memory().clone();
                    // SAFETY: `ptr` is a block of the graph's memory holding `ty` (the capture's
                    // output there had this type); `memory` keeps the block from going back to
                    // the pool, and no replay writes it while this array is held (`try_run`
                    // checks `handed` first).
                    let out = unsafe {
                        Array::from_external(*ptr as *mut u8, ty.clone(), Box::new(memory))
                    };
                    self.handed.push(out.watch());
                    out
                }
            };
            outs.push(out);
        }
        Ok(outs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_waits_until_large_inputs_stop_moving() {
        let big = MOVABLE_INPUT_BYTES + 1;
        // A parameter at the same place, token ids somewhere new: copy the ids in.
        assert_eq!(
            movable_inputs(&[10, 20], &[10, 30], &[big, 64]),
            Some(vec![false, true])
        );
        // A large input moved: not yet.
        assert_eq!(movable_inputs(&[10, 20], &[11, 20], &[big, 64]), None);
        // Nothing moved: every input is read in place.
        assert_eq!(
            movable_inputs(&[10, 20], &[10, 20], &[big, big]),
            Some(vec![false, false])
        );
        // A large input at its limit may move.
        assert_eq!(
            movable_inputs(&[1], &[2], &[MOVABLE_INPUT_BYTES]),
            Some(vec![true])
        );
        // Calls with a different number of inputs never match.
        assert_eq!(movable_inputs(&[1], &[1, 2], &[4, 4]), None);
    }
}
