//! Compiling a trace into a program of region calls, and running it.

use super::array::Array;
use super::replay::{GraphStats, Replay};
use crate::cuda;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::host::exec_trace::{ExecStep, ExecutionTrace, Note};
use crate::host::partition::{partition_among, Lineup, Partition, Region, Rejection};
use crate::host::PluginHost;
use crate::ir::{BoundSymbol, ShapeDisplay, TensorType, Trace, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;
use thunder_abi::abi_stable::std_types::RSlice;
use thunder_abi::{CompiledBox, ExecContext, PluginError, TensorDesc};

struct Step {
    /// Index of the executor in the lineup.
    executor: usize,
    name: String,
    region: usize,
    /// `None` for an alias step: the plugin never compiled it.
    compiled: Option<CompiledBox>,
    /// Where the step's tensors live, which picks the context and stream it runs with.
    device: Device,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    frees: Vec<usize>,
    /// The region only reshapes one value whose buffer the program alone holds (see
    /// `is_alias`): every array is contiguous, so its output is the input's buffer under the
    /// new shape, and the plugin is not called (a lone reshape that several regions read, such
    /// as a gradient that two GEMMs and a bias reduction take, was a copy kernel).
    alias: bool,
}

/// Whether step `s` of `et` is a reshape the runtime runs as an alias (see [`Step::alias`]).
#[cfg(test)]
fn is_alias_step(t: &Trace, s: &ExecStep) -> bool {
    is_alias(t, &t.bsyms, &s.ops, &s.inputs, &s.outputs)
}

/// Whether a region of `bsyms` (values typed by `t`) only reshapes one value into a buffer
/// the program alone holds: the runtime runs it as an alias (see [`Step::alias`]), so it is
/// not compiled. (A gradient returned reshaped, such as GPT-2's qkv bias gradient summed in
/// its [3, C] shape, was a copy kernel.)
fn is_alias(
    t: &Trace,
    bsyms: &[BoundSymbol],
    ops: &[usize],
    inputs: &[Value],
    outputs: &[Value],
) -> bool {
    let (&[input], &[output]) = (inputs, outputs) else {
        return false;
    };
    let (a, b) = (t.ty(input), t.ty(output));
    let only_reshapes = !ops.is_empty()
        && ops
            .iter()
            .all(|&i| bsyms.get(i).is_some_and(|b| b.sym.id == "prims.reshape"));
    // A returned reshape may share its input's buffer only when that buffer is the program's
    // own: the value it reshapes (through any chain of reshapes, each possibly an alias
    // itself) is not an input (the caller's tensor), and no other output is that value or a
    // reshape of it (two outputs would share storage).
    let may_alias = || {
        if !t.outputs.contains(&output) {
            return true;
        }
        let root = reshape_root(bsyms, input);
        !t.inputs.contains(&root)
            && t.outputs
                .iter()
                .filter(|&&o| reshape_root(bsyms, o) == root)
                .count()
                == 1
    };
    only_reshapes
        && a.dtype == b.dtype
        && a.device == b.device
        && a.size_bytes() == b.size_bytes()
        && may_alias()
}

/// The value `v` reshapes, through any chain of `prims.reshape` in `bsyms` (`v` itself when
/// no reshape writes it).
fn reshape_root(bsyms: &[BoundSymbol], mut v: Value) -> Value {
    while let Some(source) = bsyms
        .iter()
        .find(|b| b.outputs.contains(&v))
        .filter(|b| b.sym.id == "prims.reshape")
        .and_then(|b| b.input_values().next())
    {
        v = source;
    }
    v
}

/// How long one step (a region call) took in [`CompiledProgram::run_profiled`].
#[derive(Debug, Clone)]
pub struct StepTime {
    pub executor: String,
    /// The region's number in the execution trace (`region3`).
    pub region: usize,
    pub seconds: f64,
}

/// A program ready to run: every value has a dense slot with its static type and strides.
pub struct CompiledProgram {
    slot_types: Vec<TensorType>,
    slot_strides: Vec<Vec<i64>>,
    input_names: Vec<String>,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    steps: Vec<Step>,
    /// Present when an executor of a step has `run_fallback = true`.
    rebuild: Option<Rebuild>,
    /// Seconds spent building this program, by stage (see [`CompiledProgram::build_stages`]).
    build_stages: Vec<(String, f64)>,
    /// Present when every value lives on one CUDA device and replay is on (see `replay.rs`).
    replay: Option<Replay>,
    /// See [`CompiledProgram::keep_outputs_in_graph`].
    in_graph_from: usize,
}

/// What a program keeps to replace itself when a step of an executor with `run_fallback` fails
/// in `run`: the executors and the trace it was compiled from, and what was already left out.
struct Rebuild {
    lineup: Arc<Lineup>,
    trace: Trace,
    statics: Arc<HashSet<Value>>,
    excluded: HashSet<usize>,
    notes: Vec<Note>,
    /// The program compiled without the failed executor; once set, every run goes to it.
    fallback: OnceLock<Box<Fallback>>,
    /// Held while the fallback is built, so concurrent failures build it once.
    building: Mutex<()>,
}

struct Fallback {
    execution: ExecutionTrace,
    program: CompiledProgram,
}

// Jitted functions share compiled programs between threads.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<CompiledProgram>();
};

/// Why a run stopped: a step's plugin failed (maybe recoverable), or anything else.
enum RunFailure {
    Step { step: usize, error: PluginError },
    Other(Error),
}

impl From<Error> for RunFailure {
    fn from(e: Error) -> Self {
        RunFailure::Other(e)
    }
}

/// The one CUDA device every value of a program lives on, when there is one and some region
/// runs there: such a program enqueues all its work on that device's stream, so it can be
/// replayed as a CUDA graph.
fn graph_device(slot_types: &[TensorType], steps: &[Step]) -> Option<u32> {
    let mut device = None;
    for ty in slot_types {
        match ty.device {
            Device::Cuda(o) if *device.get_or_insert(o) == o => {}
            _ => return None,
        }
    }
    device.filter(|_| steps.iter().any(|s| !s.alias))
}

fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    strides
}

/// Adds a note unless an equal one is there (claims repeat in every decomposition round).
fn add_note(notes: &mut Vec<Note>, executor: &str, message: String) {
    let note = Note {
        executor: executor.to_string(),
        message,
    };
    if !notes.contains(&note) {
        notes.push(note);
    }
}

fn rejection_message(r: &Rejection) -> String {
    if r.ops.is_empty() {
        r.reason.clone()
    } else {
        format!("claim of ops {:?} rejected: {}", r.ops, r.reason)
    }
}

/// `3 ops (prims.neg, prims.exp, prims.add)`, for messages.
fn describe_region(part: &Partition, region: &Region) -> String {
    const SHOWN: usize = 4;
    let mut ids: Vec<&str> = region
        .ops
        .iter()
        .take(SHOWN)
        .map(|&i| &*part.bsyms[i].sym.id)
        .collect();
    if region.ops.len() > SHOWN {
        ids.push("...");
    }
    let n = region.ops.len();
    format!(
        "{n} op{} ({})",
        if n == 1 { "" } else { "s" },
        ids.join(", ")
    )
}

/// Partitions and compiles `trace`. An executor whose compile fails is reported and left out,
/// and the trace is partitioned again without it, so its regions fall to the next executor.
/// Rejected claims and compile failures become notes of the execution trace.
pub fn compile(host: &PluginHost, trace: &Trace) -> Result<(ExecutionTrace, CompiledProgram)> {
    compile_with_static(host, trace, &[])
}

/// [`compile`], with the positions in `trace.inputs` of static inputs: inputs the caller
/// passes as the same array (same buffer, same values) on every run of the program, and keeps
/// alive as long as the program (an inference session's weights). Executors are told which of
/// their regions' inputs are static, directly or as views of a static input, and may keep work
/// derived from them between runs (`compile_static` in the ABI); the CPU executor keeps its
/// products' weights packed.
pub fn compile_with_static(
    host: &PluginHost,
    trace: &Trace,
    static_inputs: &[usize],
) -> Result<(ExecutionTrace, CompiledProgram)> {
    let start = Instant::now();
    let statics = static_inputs
        .iter()
        .map(|&p| {
            trace.inputs.get(p).copied().ok_or_else(|| {
                Error::Usage(format!(
                    "static input {p}: the trace has {} inputs",
                    trace.inputs.len()
                ))
            })
        })
        .collect::<Result<HashSet<Value>>>()?;
    let lineup = Arc::new(Lineup::of(host));
    let lineup_s = start.elapsed().as_secs_f64();
    let (et, mut program) = compile_among(
        &lineup,
        trace,
        Arc::new(statics),
        HashSet::new(),
        Vec::new(),
    )?;
    program.record_earlier_stage("executors", lineup_s);
    Ok((et, program))
}

/// Seconds per build stage, summed over regions and attempts: claiming, then each executor's
/// compile calls in order of first use (with their count), which is where a warm translation's
/// time goes on a GPU (module loads, library plans). Regions compile on several threads
/// ([`compile_regions`]): an executor's seconds are its calls' summed over the threads, and
/// `compile_wall_s` is the time the compiles took.
#[derive(Default)]
struct StageClock {
    claim_s: f64,
    compiles: Vec<(String, usize, f64)>,
    compile_wall_s: f64,
    compile_threads: usize,
}

impl StageClock {
    fn compiled(&mut self, executor: &str, seconds: f64) {
        match self.compiles.iter_mut().find(|(e, _, _)| e == executor) {
            Some((_, n, s)) => {
                *n += 1;
                *s += seconds;
            }
            None => self.compiles.push((executor.to_string(), 1, seconds)),
        }
    }

    fn stages(self) -> Vec<(String, f64)> {
        let threads = self.compile_threads.max(1);
        std::iter::once(("claim".to_string(), self.claim_s))
            .chain(
                self.compiles
                    .into_iter()
                    .map(|(e, n, s)| (format!("compile {e} ({n} regions)"), s)),
            )
            .chain(std::iter::once((
                format!(
                    "compile, elapsed ({threads} thread{})",
                    if threads == 1 { "" } else { "s" }
                ),
                self.compile_wall_s,
            )))
            .collect()
    }
}

/// Threads that compile a trace's regions: `THUNDER_COMPILE_THREADS` if set (1: one after
/// another), else the machine's cores, at most 8. NVRTC takes 5-30 ms a kernel: a GPT-2 step's
/// 136 fused regions took 0.7-1.9 s one after another with a cold kernel cache.
fn compile_threads() -> usize {
    let cores = || {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8)
    };
    let Ok(text) = std::env::var("THUNDER_COMPILE_THREADS") else {
        return cores();
    };
    match text.trim().parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "THUNDER_COMPILE_THREADS: expected a whole number of threads from 1 up, got {text:?}; using {}",
                    cores()
                )
            });
            cores()
        }
    }
}

type RegionCompile = (usize, std::result::Result<CompiledBox, PluginError>, f64);

/// Compiles the regions `todo` (indices into `part.regions`) on `threads` threads, each
/// taking the next region left; returns (region, result, seconds) in region order. Executors
/// are `Send + Sync` (the ABI's contract), so their compiles may run at once.
fn compile_regions(
    lineup: &Lineup,
    part: &Partition,
    todo: &[usize],
    threads: usize,
    statics: &HashSet<Value>,
) -> Result<Vec<RegionCompile>> {
    let executors = todo
        .iter()
        .map(|&i| {
            let e = part.regions[i].executor;
            lineup.executor(e).ok_or_else(|| {
                Error::Bug(format!(
                    "executor {} claimed without being created",
                    lineup.name(e)
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let one = |k: usize| -> RegionCompile {
        let start = Instant::now();
        let region = &part.regions[todo[k]];
        let static_inputs: Vec<u32> = (0..region.inputs.len() as u32)
            .filter(|&i| statics.contains(&region.inputs[i as usize]))
            .collect();
        let result = if static_inputs.is_empty() {
            executors[k].compile(&part.view, &region.spec())
        } else {
            executors[k].compile_static(
                &part.view,
                &region.spec(),
                RSlice::from_slice(&static_inputs),
            )
        }
        .into_result();
        (todo[k], result, start.elapsed().as_secs_f64())
    };
    if threads <= 1 {
        return Ok((0..todo.len()).map(one).collect());
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if k >= todo.len() {
                            return mine;
                        }
                        mine.push(one(k));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                // Plugins' panics are caught at the ABI; one here is the host's own bug.
                w.join()
                    .map_err(|_| Error::Bug("a region compile thread panicked".into()))
            })
            .collect::<Result<Vec<_>>>()
    })?
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    done.sort_by_key(|(i, _, _)| *i);
    Ok(done)
}

fn compile_among(
    lineup: &Arc<Lineup>,
    trace: &Trace,
    statics: Arc<HashSet<Value>>,
    mut excluded: HashSet<usize>,
    mut notes: Vec<Note>,
) -> Result<(ExecutionTrace, CompiledProgram)> {
    // The last compile failure, to explain why nobody is left to run an op.
    let mut last_failure: Option<(String, String)> = None;
    let mut clock = StageClock::default();
    'attempt: loop {
        let claim_start = Instant::now();
        let part = partition_among(lineup, trace, &excluded).map_err(|e| match &last_failure {
            Some((plugin, failure)) => Error::Plugin {
                plugin: plugin.clone(),
                message: format!("{failure}, and without it: {e}"),
            },
            None => e,
        })?;
        clock.claim_s += claim_start.elapsed().as_secs_f64();
        for r in &part.rejections {
            add_note(&mut notes, &r.executor, rejection_message(r));
        }
        // Aliases are run by the runtime as a view of their input: compiling one (a copy kernel
        // and its module load on a GPU) was translation time spent for nothing.
        let alias: Vec<bool> = part
            .regions
            .iter()
            .map(|region| {
                is_alias(
                    trace,
                    &part.bsyms,
                    &region.ops,
                    &region.inputs,
                    &region.outputs,
                )
            })
            .collect();
        let todo: Vec<usize> = (0..part.regions.len()).filter(|&i| !alias[i]).collect();
        // A view of a static input reads the same buffer on every run: static too.
        let mut region_statics = (*statics).clone();
        for (region, _) in part.regions.iter().zip(&alias).filter(|(_, &a)| a) {
            if region_statics.contains(&region.inputs[0]) {
                region_statics.insert(region.outputs[0]);
            }
        }
        let wall = Instant::now();
        clock.compile_threads = compile_threads().min(todo.len()).max(1);
        let results =
            compile_regions(lineup, &part, &todo, clock.compile_threads, &region_statics)?;
        clock.compile_wall_s += wall.elapsed().as_secs_f64();
        let mut compiled: Vec<Option<CompiledBox>> = std::iter::repeat_with(|| None)
            .take(part.regions.len())
            .collect();
        for (i, result, seconds) in results {
            let region = &part.regions[i];
            let name = lineup.name(region.executor);
            clock.compiled(name, seconds);
            match result {
                Ok(c) => compiled[i] = Some(c),
                Err(e) => {
                    let failure = format!(
                        "compile failed for a region of {}: {e}",
                        describe_region(&part, region)
                    );
                    tracing::warn!(executor = %name, "{failure}; falling back to the next executor");
                    add_note(
                        &mut notes,
                        name,
                        format!("{failure}; its ops fell back to the next executors"),
                    );
                    last_failure = Some((name.to_string(), failure));
                    excluded.insert(region.executor);
                    continue 'attempt;
                }
            }
        }
        let mut exec_trace = ExecutionTrace {
            trace: Trace {
                bsyms: part.bsyms,
                provenance: "Claim".into(),
                ..trace.clone()
            },
            steps: part
                .regions
                .iter()
                .map(|r| ExecStep {
                    executor: lineup.name(r.executor).to_string(),
                    ops: r.ops.clone(),
                    inputs: r.inputs.clone(),
                    outputs: r.outputs.clone(),
                    frees: Vec::new(),
                })
                .collect(),
            notes: notes.clone(),
            statics: trace
                .inputs
                .iter()
                .copied()
                .filter(|v| statics.contains(v))
                .collect(),
        };
        exec_trace.delete_last_used();
        let executors: Vec<usize> = part.regions.iter().map(|r| r.executor).collect();
        let rebuild = executors
            .iter()
            .any(|&e| lineup.run_fallback(e))
            .then(|| Rebuild {
                lineup: lineup.clone(),
                trace: trace.clone(),
                statics: statics.clone(),
                excluded,
                notes,
                fallback: OnceLock::new(),
                building: Mutex::new(()),
            });
        let mut program = CompiledProgram::new(
            &exec_trace,
            &executors,
            compiled,
            rebuild,
            lineup.cuda_graphs,
        );
        program.build_stages = clock.stages();
        return Ok((exec_trace, program));
    }
}

impl CompiledProgram {
    fn new(
        et: &ExecutionTrace,
        executors: &[usize],
        compiled: Vec<Option<CompiledBox>>,
        rebuild: Option<Rebuild>,
        cuda_graphs: bool,
    ) -> CompiledProgram {
        let t = &et.trace;
        let mut slot_of: HashMap<Value, usize> = HashMap::new();
        let mut slot_types = Vec::new();
        let mut slot = |v: Value| -> usize {
            *slot_of.entry(v).or_insert_with(|| {
                slot_types.push(t.ty(v).clone());
                slot_types.len() - 1
            })
        };
        let inputs: Vec<usize> = t.inputs.iter().map(|&v| slot(v)).collect();
        let mut steps = Vec::with_capacity(et.steps.len());
        for (region, ((s, c), &executor)) in
            et.steps.iter().zip(compiled).zip(executors).enumerate()
        {
            let device = s
                .outputs
                .iter()
                .chain(&s.inputs)
                .map(|&v| t.ty(v).device)
                .next()
                .unwrap_or(Device::Cpu);
            let alias = c.is_none();
            steps.push(Step {
                executor,
                // Profiles show who ran it: the runtime, not the plugin that claimed it.
                name: if alias {
                    "runtime (reshape view)".to_string()
                } else {
                    s.executor.clone()
                },
                region,
                compiled: c,
                device,
                alias,
                inputs: s.inputs.iter().map(|&v| slot(v)).collect(),
                outputs: s.outputs.iter().map(|&v| slot(v)).collect(),
                frees: s.frees.iter().map(|&v| slot(v)).collect(),
            });
        }
        let outputs = t.outputs.iter().map(|&v| slot(v)).collect();
        let slot_strides = slot_types
            .iter()
            .map(|ty| contiguous_strides(&ty.shape))
            .collect();
        let mut program = CompiledProgram {
            slot_types,
            slot_strides,
            input_names: t.input_names(),
            inputs,
            outputs,
            steps,
            rebuild,
            build_stages: Vec::new(),
            replay: None,
            in_graph_from: usize::MAX,
        };
        program.set_cuda_graphs(cuda_graphs);
        program
    }

    /// Turns CUDA-graph replay of this program on or off (on takes effect only for a program
    /// whose values all live on one CUDA device); turning it on again starts afresh.
    pub fn set_cuda_graphs(&mut self, on: bool) {
        self.replay = graph_device(&self.slot_types, &self.steps)
            .filter(|_| on)
            .map(|ordinal| Replay::new(ordinal, self.in_graph_from));
    }

    /// Says that outputs from index `first` on are released by the caller before its next
    /// call (a forward's residuals, freed by its backward): a replay hands them out in the
    /// graph's memory whatever their size, where small outputs are otherwise copied out so
    /// that they may be kept. A call made while one is held still runs region by region, so
    /// this never lets a replay overwrite a held output; it only saves the copies.
    pub fn keep_outputs_in_graph(&mut self, first: usize) {
        self.in_graph_from = first;
        let on = self.replay.is_some();
        self.set_cuda_graphs(on);
    }

    /// What CUDA-graph replay did for this program (the one runs go to after run failures
    /// replaced it); `None` when it does not replay (not all on one CUDA device, or turned off).
    pub fn graph_stats(&self) -> Option<GraphStats> {
        match self.fallback() {
            Some(fb) => fb.program.graph_stats(),
            None => self.replay.as_ref().map(Replay::stats),
        }
    }

    fn fallback(&self) -> Option<&Fallback> {
        self.rebuild.as_ref()?.fallback.get().map(|b| &**b)
    }

    /// How many times a run failure replaced this program (each replacement compiled without
    /// one more executor); 0 while it runs as compiled.
    pub fn fallbacks(&self) -> usize {
        let mut n = 0;
        let mut p = self;
        while let Some(fb) = p.fallback() {
            n += 1;
            p = &fb.program;
        }
        n
    }

    /// Seconds spent building this program, by stage, in order: the passes (when built by
    /// `jit::compile_trace`), creating the executors, claiming, then each executor's compile
    /// calls as `compile NAME (N regions)` (summed over the compile threads), then the time
    /// they took together as `compile, elapsed (T threads)`.
    pub fn build_stages(&self) -> &[(String, f64)] {
        &self.build_stages
    }

    /// Puts a stage that ran before `compile` (the passes) first in [`Self::build_stages`].
    pub(crate) fn record_earlier_stage(&mut self, stage: &str, seconds: f64) {
        self.build_stages.insert(0, (stage.to_string(), seconds));
    }

    /// The execution trace that runs follow now, when run failures replaced this program
    /// (`run_fallback`); its notes say what failed. `None` while it runs as compiled.
    pub fn fallback_execution(&self) -> Option<&ExecutionTrace> {
        let mut found = None;
        let mut p = self;
        while let Some(fb) = p.fallback() {
            found = Some(&fb.execution);
            p = &fb.program;
        }
        found
    }

    pub fn input_types(&self) -> Vec<TensorType> {
        self.inputs
            .iter()
            .map(|&s| self.slot_types[s].clone())
            .collect()
    }

    fn desc<'a>(&'a self, slot: usize, a: &Array) -> TensorDesc<'a> {
        let ty = &self.slot_types[slot];
        TensorDesc {
            data: a.data_ptr() as *mut std::ffi::c_void,
            byte_offset: 0,
            device: ty.device.to_desc(),
            dtype: ty.dtype,
            shape: RSlice::from_slice(&ty.shape),
            strides: RSlice::from_slice(&self.slot_strides[slot]),
        }
    }

    /// Runs the program. Inputs must match the traced types exactly.
    ///
    /// A step whose plugin fails returns [`Error::Plugin`] naming the plugin and region, unless
    /// that executor has `run_fallback = true`: then the trace is compiled again without it
    /// (once; later runs go straight to that program) and run from the inputs. Either way no
    /// output of the failed run reaches the caller.
    pub fn run(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        if let Some(fb) = self.fallback() {
            return fb.program.run(inputs);
        }
        if let Some(replay) = &self.replay {
            self.check_inputs(inputs)?;
            if let Some(outputs) = replay.try_run(self, inputs)? {
                return Ok(outputs);
            }
        }
        let (step, error) = match self.run_steps(inputs) {
            Ok(outputs) => return Ok(outputs),
            Err(RunFailure::Other(e)) => return Err(e),
            Err(RunFailure::Step { step, error }) => (&self.steps[step], error),
        };
        let failure = format!("region{} failed in run: {error}", step.region);
        let Some(rebuild) = self
            .rebuild
            .as_ref()
            .filter(|r| r.lineup.run_fallback(step.executor))
        else {
            return Err(Error::Plugin {
                plugin: step.name.clone(),
                message: format!(
                    "{failure} (with `run_fallback = true` in its plugins.toml entry, the \
                     program would be re-run on the next executors instead)"
                ),
            });
        };
        tracing::warn!(
            executor = %step.name,
            region = step.region,
            "{failure}; compiling the program without it and running it again (run_fallback)"
        );
        self.build_fallback(rebuild, step, &failure)?
            .program
            .run(inputs)
    }

    /// The program without `step`'s executor, built once however many runs fail at a time.
    fn build_fallback<'a>(
        &'a self,
        rebuild: &'a Rebuild,
        step: &Step,
        failure: &str,
    ) -> Result<&'a Fallback> {
        let _building = rebuild
            .building
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(fb) = rebuild.fallback.get() {
            return Ok(fb);
        }
        let mut excluded = rebuild.excluded.clone();
        excluded.insert(step.executor);
        let mut notes = rebuild.notes.clone();
        add_note(
            &mut notes,
            &step.name,
            format!(
                "{failure}; the program was compiled again without it and re-run (run_fallback)"
            ),
        );
        let (execution, program) = compile_among(
            &rebuild.lineup,
            &rebuild.trace,
            rebuild.statics.clone(),
            excluded,
            notes,
        )
        .map_err(|e| Error::Plugin {
            plugin: step.name.clone(),
            message: format!("{failure}; re-running without it failed: {e}"),
        })?;
        Ok(rebuild
            .fallback
            .get_or_init(|| Box::new(Fallback { execution, program })))
    }

    fn check_inputs(&self, inputs: &[Array]) -> Result<()> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::Usage(format!(
                "expected {} inputs ({}), got {}",
                self.inputs.len(),
                self.input_names.join(", "),
                inputs.len()
            )));
        }
        for ((&s, a), name) in self.inputs.iter().zip(inputs).zip(&self.input_names) {
            let want = &self.slot_types[s];
            let got = a.ty();
            if want.shape != got.shape || want.dtype != got.dtype || want.device != got.device {
                return Err(Error::Input {
                    name: name.clone(),
                    message: format!(
                        "expected {} {}{}, got {} {}{}",
                        want.device,
                        want.dtype.short_name(),
                        ShapeDisplay(&want.shape),
                        got.device,
                        got.dtype.short_name(),
                        ShapeDisplay(&got.shape)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Runs every step. Each step writes fresh buffers that join the program's values only
    /// when the step succeeds, so a failed step leaves nothing half-written behind.
    fn run_steps(&self, inputs: &[Array]) -> std::result::Result<Vec<Array>, RunFailure> {
        self.run_steps_timed(inputs, None)
    }

    /// Runs every step while a CUDA graph is being captured (`replay.rs`): a failure is the
    /// capture's, so it is returned, never recovered by `run_fallback`.
    pub(super) fn run_steps_for_capture(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        self.run_steps(inputs).map_err(|f| self.failure_error(f))
    }

    /// A run failure as the error returned where nothing is retried: a step's names its
    /// plugin and region.
    fn failure_error(&self, failure: RunFailure) -> Error {
        match failure {
            RunFailure::Other(e) => e,
            RunFailure::Step { step, error } => Error::Plugin {
                plugin: self.steps[step].name.clone(),
                message: format!("region{} failed in run: {error}", self.steps[step].region),
            },
        }
    }

    /// Runs the program once, timing each step (region call); a CUDA step's time includes
    /// waiting for its device, so the times add up to the call. Used by `thunder bench`;
    /// steps are not retried on another executor here.
    pub fn run_profiled(&self, inputs: &[Array]) -> Result<(Vec<Array>, Vec<StepTime>)> {
        self.run_timed(inputs, true)
    }

    /// As [`Self::run_profiled`], but a CUDA step is not waited for: each time is the host's
    /// cost of the region call alone (checks, allocation, the plugin's launches), which is
    /// what bounds a program whose kernels are shorter than their launches.
    pub fn run_host_profiled(&self, inputs: &[Array]) -> Result<(Vec<Array>, Vec<StepTime>)> {
        self.run_timed(inputs, false)
    }

    /// [`Self::run_profiled`] (`wait_for_device`) or [`Self::run_host_profiled`].
    pub fn run_timed(
        &self,
        inputs: &[Array],
        wait_for_device: bool,
    ) -> Result<(Vec<Array>, Vec<StepTime>)> {
        if let Some(fb) = self.fallback() {
            return fb.program.run_timed(inputs, wait_for_device);
        }
        let mut times = Vec::with_capacity(self.steps.len());
        let outputs = self
            .run_steps_timed(inputs, Some((&mut times, wait_for_device)))
            .map_err(|f| self.failure_error(f))?;
        let steps = self
            .steps
            .iter()
            .zip(times)
            .map(|(s, seconds)| StepTime {
                executor: s.name.clone(),
                region: s.region,
                seconds,
            })
            .collect();
        Ok((outputs, steps))
    }

    fn run_steps_timed(
        &self,
        inputs: &[Array],
        mut times: Option<(&mut Vec<f64>, bool)>,
    ) -> std::result::Result<Vec<Array>, RunFailure> {
        self.check_inputs(inputs)?;
        let mut slots: Vec<Option<Array>> = vec![None; self.slot_types.len()];
        for (&s, a) in self.inputs.iter().zip(inputs) {
            slots[s] = Some(a.clone());
        }
        for (k, step) in self.steps.iter().enumerate() {
            if step.alias {
                let start = times.is_some().then(std::time::Instant::now);
                let (&input, &output) = (&step.inputs[0], &step.outputs[0]);
                let a = slots[input]
                    .as_ref()
                    .ok_or_else(|| Error::Bug(format!("slot {input} read before it was written")))?
                    .aliased(self.slot_types[output].clone())?;
                slots[output] = Some(a);
                for &s in &step.frees {
                    slots[s] = None;
                }
                if let (Some((times, _)), Some(start)) = (times.as_mut(), start) {
                    times.push(start.elapsed().as_secs_f64());
                }
                continue;
            }
            let mut in_descs = Vec::with_capacity(step.inputs.len());
            for &s in &step.inputs {
                let a = slots[s]
                    .as_ref()
                    .ok_or_else(|| Error::Bug(format!("slot {s} read before it was written")))?;
                in_descs.push(self.desc(s, a));
            }
            let context = match step.device {
                Device::Cpu => ExecContext::CPU,
                Device::Cuda(ordinal) => cuda::exec_context(ordinal).map_err(Error::from)?,
            };
            // Not cleared: plugins write every element of their outputs (see `Array::reused`).
            let mut outs = Vec::with_capacity(step.outputs.len());
            for &s in &step.outputs {
                outs.push(Array::reused(self.slot_types[s].clone())?);
            }
            let out_descs: Vec<TensorDesc> = step
                .outputs
                .iter()
                .zip(&outs)
                .map(|(&s, a)| self.desc(s, a))
                .collect();
            // Read only when timing: an untimed call of a tiny program is a microsecond.
            let start = times.is_some().then(std::time::Instant::now);
            step.compiled
                .as_ref()
                .ok_or_else(|| Error::Bug(format!("step {k} runs without being compiled")))?
                .run(
                    RSlice::from_slice(&in_descs),
                    RSlice::from_slice(&out_descs),
                    context,
                )
                .into_result()
                .map_err(|error| RunFailure::Step { step: k, error })?;
            if let (Some((times, wait_for_device)), Some(start)) = (times.as_mut(), start) {
                if let (Device::Cuda(ordinal), true) = (step.device, *wait_for_device) {
                    cuda::synchronize(ordinal).map_err(Error::from)?;
                }
                times.push(start.elapsed().as_secs_f64());
            }
            for (&s, a) in step.outputs.iter().zip(outs) {
                slots[s] = Some(a);
            }
            for &s in &step.frees {
                slots[s] = None;
            }
        }
        Ok(self
            .outputs
            .iter()
            .map(|&s| {
                slots[s]
                    .clone()
                    .ok_or_else(|| Error::Bug(format!("output slot {s} never written")))
            })
            .collect::<Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clang;
    use crate::trace_ctx::trace_with;
    use crate::DType;

    /// `r = reshape(x, [6, 2])` and `y = r * 2`; outputs chosen by `return_r`.
    fn reshape_trace(return_r: bool) -> Trace {
        let x = TensorType::new(vec![3, 4], DType::F32, Device::Cpu);
        trace_with(&[("x".into(), x)], HashSet::new(), "test", |xs| {
            let r = clang::reshape(&xs[0], vec![6, 2])?;
            let y = clang::unary(
                "exp",
                crate::prims::Prim::Exp,
                &r,
                clang::Promotion::Default,
            )?;
            Ok(if return_r { vec![y, r] } else { vec![y] })
        })
        .expect("trace")
    }

    fn step_of(t: &Trace, op: usize) -> ExecStep {
        let b = &t.bsyms[op];
        ExecStep {
            executor: "test".into(),
            ops: vec![op],
            inputs: b.input_values().collect(),
            outputs: b.outputs.clone(),
            frees: Vec::new(),
        }
    }

    #[test]
    fn a_lone_reshape_of_an_intermediate_is_an_alias_step() {
        let t = reshape_trace(false);
        assert_eq!(t.bsyms[0].sym.id, "prims.reshape");
        assert!(is_alias_step(&t, &step_of(&t, 0)));
        // The exp is not a reshape.
        assert!(!is_alias_step(&t, &step_of(&t, 1)));
        // A returned reshape of an input is copied: the caller may write into the output in
        // place, which must not change its input.
        let t = reshape_trace(true);
        assert!(!is_alias_step(&t, &step_of(&t, 0)));
    }

    /// `e = exp(x)`, `r = reshape(e, [6, 2])`; returns `r`, and `e` too with `return_e`.
    fn returned_reshape_of_an_intermediate(return_e: bool) -> Trace {
        let x = TensorType::new(vec![3, 4], DType::F32, Device::Cpu);
        trace_with(&[("x".into(), x)], HashSet::new(), "test", |xs| {
            let e = clang::unary(
                "exp",
                crate::prims::Prim::Exp,
                &xs[0],
                clang::Promotion::Default,
            )?;
            let r = clang::reshape(&e, vec![6, 2])?;
            Ok(if return_e { vec![r, e] } else { vec![r] })
        })
        .expect("trace")
    }

    #[test]
    fn a_returned_reshape_aliases_only_a_buffer_nothing_else_returns() {
        let t = returned_reshape_of_an_intermediate(false);
        assert_eq!(t.bsyms[1].sym.id, "prims.reshape");
        assert!(
            is_alias_step(&t, &step_of(&t, 1)),
            "exp's buffer is the program's alone: the output takes it"
        );
        let t = returned_reshape_of_an_intermediate(true);
        assert!(
            !is_alias_step(&t, &step_of(&t, 1)),
            "two outputs would share one buffer"
        );
    }

    /// `e = exp(x)`, `r1 = reshape(e)`, `r2 = reshape(r1)`, `r3 = reshape(e)`; returns `r2`
    /// and, by `also`, `e` or `r3`.
    fn reshape_chain(also: &str) -> Trace {
        let x = TensorType::new(vec![3, 4], DType::F32, Device::Cpu);
        trace_with(&[("x".into(), x)], HashSet::new(), "test", |xs| {
            let e = clang::unary(
                "exp",
                crate::prims::Prim::Exp,
                &xs[0],
                clang::Promotion::Default,
            )?;
            let r1 = clang::reshape(&e, vec![12])?;
            let r2 = clang::reshape(&r1, vec![6, 2])?;
            let r3 = clang::reshape(&e, vec![2, 6])?;
            Ok(match also {
                "e" => vec![r2, e],
                "r3" => vec![r2, r3],
                _ => vec![r2],
            })
        })
        .expect("trace")
    }

    #[test]
    fn returned_reshapes_of_one_buffer_through_a_chain_are_not_aliases() {
        // r1 is an intermediate alias of e's buffer: r2 returned alone may take it too.
        let t = reshape_chain("");
        assert!(is_alias_step(&t, &step_of(&t, 1)));
        assert!(is_alias_step(&t, &step_of(&t, 2)));
        // With e returned too, r2 (through r1) would share e's buffer.
        let t = reshape_chain("e");
        assert!(is_alias_step(&t, &step_of(&t, 1)), "r1 is not returned");
        assert!(!is_alias_step(&t, &step_of(&t, 2)));
        // With r3, another returned reshape of e, neither may take e's buffer.
        let t = reshape_chain("r3");
        assert!(!is_alias_step(&t, &step_of(&t, 2)));
        assert!(!is_alias_step(&t, &step_of(&t, 3)));
    }

    #[test]
    fn an_alias_shares_the_buffer_under_the_new_type() {
        let x = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).expect("array");
        let ty = TensorType::new(vec![3, 2], DType::F32, Device::Cpu);
        let r = x.aliased(ty).expect("alias");
        assert_eq!(r.shape(), &[3, 2]);
        assert_eq!(r.as_ptr(), x.as_ptr());
        assert_eq!(
            r.to_vec::<f32>().expect("read"),
            x.to_vec::<f32>().expect("read")
        );
        let wrong = TensorType::new(vec![7], DType::F32, Device::Cpu);
        assert!(x.aliased(wrong).is_err());
        let other_dtype = TensorType::new(vec![6], DType::I32, Device::Cpu);
        assert!(x.aliased(other_dtype).is_err());
    }
}
