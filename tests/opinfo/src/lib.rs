//! OpInfo tables, after Thunder's `thunder/tests/opinfos.py`: one entry per op (every prim and
//! every ltorch op) holding the dtypes it supports, a sample generator and an error generator.
//!
//! Samples are defined once, here, in Rust. They feed three consumers:
//! - the conformance harness (`tests/tests/opinfo.rs`), which runs every sample on every loaded
//!   executor and compares with PyTorch and with the interpreter, and runs every error case;
//! - `opinfo-dump` (`src/bin/opinfo-dump.rs`), which writes the samples for
//!   `scripts/gen_opinfo_fixtures.py` to evaluate in PyTorch;
//! - `thunder ops`, which asks each executor to claim each op's first sample per dtype.
//!
//! A sample's fixture is found by its key (`op/dtype/index`) and checked by a fingerprint of
//! its program text and input bytes, so a changed generator is reported as a stale fixture
//! instead of being compared against another sample's reference.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

pub mod dump;
mod families;
mod gen;
mod ltorch_ce;
mod ltorch_conv;
mod ltorch_indexing;
mod ltorch_nn;
mod ltorch_ops;
mod prim_ops;
mod random_ops;

pub use gen::{Domain, Gen};

use std::collections::HashSet;
use std::sync::OnceLock;
use thunder_core::ir::{lookup_symbol, Arg, TensorType, Trace};
use thunder_core::{Array, DType, Error, Result, Tensor};

/// Where a symbol lives. Clang has no entry: its functions are Rust helpers that ltorch
/// decompositions call, not symbols recorded in traces (see `thunder ops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Prims,
    Ltorch,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Prims => "prims",
            Layer::Ltorch => "ltorch",
        }
    }
}

/// Which tolerances a sample's outputs are compared with (torch.testing's defaults, loosened
/// for f16/bf16 where the computation accumulates or rounds several times).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tol {
    /// torch.testing.assert_close defaults; integer and bool outputs exactly.
    Default,
    /// Sums and products of several terms (reductions, matmul, norms): the order of
    /// accumulation differs between executors and PyTorch.
    Accum,
    /// Several roundings in a row (softmax, gelu, normalizations).
    Smooth,
}

impl Tol {
    /// `(rtol, atol)` for outputs of `dtype`.
    pub fn for_dtype(self, dtype: DType) -> (f64, f64) {
        match (self, dtype) {
            (Tol::Accum, DType::F16) => (1e-2, 1e-2),
            (Tol::Accum, DType::BF16) => (1.6e-2, 1e-2),
            (Tol::Accum, DType::F32) => (1e-5, 1e-5),
            (Tol::Smooth, DType::F16) => (1e-2, 1e-3),
            (Tol::Smooth, DType::BF16) => (1.6e-2, 1e-3),
            (_, DType::F16) => (1e-3, 1e-5),
            (_, DType::BF16) => (1.6e-2, 1e-5),
            (_, DType::F32) => (1.3e-6, 1e-5),
            (_, DType::F64) => (1e-7, 1e-7),
            _ => (0.0, 0.0),
        }
    }
}

/// How a tensor argument reaches the op. The runtime keeps every buffer dense, so a
/// non-contiguous input is made the way a user's program makes one: a view op inside the
/// program (`ltorch.transpose`, `ltorch.expand`) in front of the op. A fusing executor sees the
/// strided (or stride-0) access inside its region; PyTorch gets a real strided view.
#[derive(Debug, Clone, PartialEq)]
pub enum View {
    Plain,
    /// Stored with its last two dims swapped and transposed back in the program.
    Transposed,
    /// Stored with size-1 dims and expanded to this shape in the program (stride 0).
    Expanded(Vec<i64>),
}

#[derive(Debug, Clone)]
pub enum SArg {
    Tensor(Array, View),
    /// A literal: anything but `Arg::Value`.
    Lit(Arg),
}

/// One call of the op.
#[derive(Debug, Clone)]
pub struct Sample {
    pub args: Vec<SArg>,
    pub note: String,
}

impl Sample {
    pub fn new(note: impl Into<String>, args: Vec<SArg>) -> Sample {
        Sample {
            args,
            note: note.into(),
        }
    }
}

/// When an error case must be refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// By the meta functions while tracing: `Error::Op` naming the op.
    Meta,
    /// Only the values can tell (an index out of range): the call traces, and running it
    /// fails on every executor with an error naming the op; no executor may crash or return
    /// garbage.
    Run,
}

/// A call the op must refuse, with a message containing `expect` and, where `op_kind` is
/// given, an `Error::Op` of that kind (`OpErrorKind::tag`).
#[derive(Debug, Clone)]
pub struct ErrorCase {
    pub args: Vec<SArg>,
    pub kind: ErrorKind,
    pub expect: String,
    pub op_kind: Option<&'static str>,
    pub note: String,
}

impl ErrorCase {
    pub fn new(note: impl Into<String>, args: Vec<SArg>, expect: impl Into<String>) -> ErrorCase {
        ErrorCase {
            args,
            kind: ErrorKind::Meta,
            expect: expect.into(),
            op_kind: None,
            note: note.into(),
        }
    }

    /// The error must also be of this kind (`"arity"`, `"shape mismatch"`, `"dtype"`, ...).
    pub fn of_kind(self, tag: &'static str) -> ErrorCase {
        ErrorCase {
            op_kind: Some(tag),
            ..self
        }
    }

    /// A case only running can refuse (see [`ErrorKind::Run`]).
    pub fn at_run(
        note: impl Into<String>,
        args: Vec<SArg>,
        expect: impl Into<String>,
    ) -> ErrorCase {
        ErrorCase {
            kind: ErrorKind::Run,
            ..ErrorCase::new(note, args, expect)
        }
    }
}

pub type SampleFn = Box<dyn Fn(&mut Gen, DType) -> Vec<Sample> + Send + Sync>;
pub type ErrorFn = Box<dyn Fn(&mut Gen) -> Vec<ErrorCase> + Send + Sync>;

/// One op's entry.
pub struct OpInfo {
    /// The symbol id, e.g. `ltorch.add`.
    pub id: String,
    pub layer: Layer,
    /// Every dtype the op accepts for its main tensor argument; the harness checks that the
    /// meta accepts exactly these on the op's first sample.
    pub dtypes: Vec<DType>,
    pub tol: Tol,
    samples: SampleFn,
    errors: ErrorFn,
}

impl OpInfo {
    pub fn new(id: &str, dtypes: &[DType], samples: SampleFn) -> OpInfo {
        let layer = if id.starts_with("prims.") {
            Layer::Prims
        } else {
            Layer::Ltorch
        };
        OpInfo {
            id: id.to_string(),
            layer,
            dtypes: dtypes.to_vec(),
            tol: Tol::Default,
            samples,
            errors: Box::new(|_| Vec::new()),
        }
    }

    pub fn tol(mut self, tol: Tol) -> OpInfo {
        self.tol = tol;
        self
    }

    pub fn errors(mut self, errors: ErrorFn) -> OpInfo {
        self.errors = errors;
        self
    }

    /// The name without its namespace (`add`).
    pub fn name(&self) -> &str {
        self.id.split_once('.').map_or(self.id.as_str(), |(_, n)| n)
    }

    /// The samples for `dtype` (deterministic: the generator is seeded by op and dtype).
    pub fn samples(&self, dtype: DType) -> Vec<Sample> {
        let mut g = Gen::new(&self.id, dtype.short_name());
        (self.samples)(&mut g, dtype)
    }

    /// The error cases.
    pub fn error_cases(&self) -> Vec<ErrorCase> {
        let mut g = Gen::new(&self.id, "errors");
        (self.errors)(&mut g)
    }
}

/// Every entry: prims first, then ltorch, each in its table's order.
pub fn table() -> &'static [OpInfo] {
    static TABLE: OnceLock<Vec<OpInfo>> = OnceLock::new();
    TABLE.get_or_init(|| {
        // Samples bind ltorch symbols by id: the library is registered before any is built.
        thunder_torch::register();
        let mut t = prim_ops::entries();
        t.extend(ltorch_ops::entries());
        t.extend(ltorch_indexing::entries());
        t.extend(ltorch_conv::entries());
        t.extend(random_ops::entries());
        t
    })
}

pub fn find(id: &str) -> Option<&'static OpInfo> {
    table().iter().find(|e| e.id == id)
}

/// Every symbol id that should have an entry: the prim table and the ltorch table.
pub fn symbol_ids() -> Vec<&'static str> {
    thunder_core::prims::Prim::ALL
        .iter()
        .map(|p| p.id())
        .chain(thunder_torch::symbols().iter().map(|s| s.id))
        .collect()
}

/// The stable key of sample `index` of `op` for `dtype`, as the fixtures name it.
pub fn sample_key(op: &str, dtype: DType, index: usize) -> String {
    format!("{op}/{}/{index}", dtype.short_name())
}

/// A traced one-op program and its inputs (in parameter order).
pub struct Built {
    pub trace: Trace,
    pub inputs: Vec<Array>,
}

impl Built {
    pub fn text(&self) -> String {
        thunder_core::text::print_trace(&self.trace)
    }

    /// A fingerprint of the program text and the input bytes (FNV-1a, 64 bits): fixtures
    /// store it so that a sample whose generator changed is reported as stale.
    pub fn fingerprint(&self) -> Result<String> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        // The positional form: fingerprints do not move when the printing of keyword
        // arguments does.
        eat(thunder_core::text::print_trace_positional(&self.trace).as_bytes());
        for a in &self.inputs {
            eat(a.ty().to_string().as_bytes());
            eat(a.bytes()?);
        }
        Ok(format!("{h:016x}"))
    }
}

fn input_name(i: usize) -> String {
    const NAMES: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "h"];
    NAMES
        .get(i)
        .map_or_else(|| format!("x{i}"), |n| n.to_string())
}

fn bind1(id: &str, args: Vec<Arg>) -> Result<Tensor> {
    let sym = lookup_symbol(id).ok_or_else(|| Error::Bug(format!("unknown symbol {id}")))?;
    thunder_core::trace_ctx::bind1(sym, args)
}

/// Traces `op` applied to `args` into a program whose inputs are the sample's tensors (views
/// are applied in the program, in front of the op).
pub fn build(op: &str, args: &[SArg]) -> Result<Built> {
    thunder_torch::register();
    let sym = lookup_symbol(op).ok_or_else(|| Error::Usage(format!("unknown symbol {op}")))?;
    let tensors: Vec<(&Array, &View)> = args
        .iter()
        .filter_map(|a| match a {
            SArg::Tensor(t, v) => Some((t, v)),
            SArg::Lit(_) => None,
        })
        .collect();
    let inputs: Vec<(String, TensorType)> = tensors
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (input_name(i), t.ty().clone()))
        .collect();
    let trace = thunder_core::trace_ctx::trace_with(
        &inputs,
        HashSet::new(),
        "# OpInfo sample",
        |proxies| {
            let mut next = proxies.iter().zip(&tensors);
            let mut call = Vec::with_capacity(args.len());
            for a in args {
                match a {
                    SArg::Lit(l) => call.push(l.clone()),
                    SArg::Tensor(..) => {
                        let (p, (_, view)) = next
                            .next()
                            .ok_or_else(|| Error::Bug("sample inputs out of step".into()))?;
                        let t = match view {
                            View::Plain => p.clone(),
                            View::Transposed => {
                                let r = p.shape().len() as i64;
                                bind1(
                                    "ltorch.transpose",
                                    vec![Arg::Value(p.value()), Arg::Int(r - 2), Arg::Int(r - 1)],
                                )?
                            }
                            View::Expanded(shape) => bind1(
                                "ltorch.expand",
                                vec![Arg::Value(p.value()), Arg::Ints(shape.clone())],
                            )?,
                        };
                        call.push(Arg::Value(t.value()));
                    }
                }
            }
            thunder_core::trace_ctx::bind(sym, call)
        },
    )?;
    Ok(Built {
        trace,
        inputs: tensors.iter().map(|(t, _)| (*t).clone()).collect(),
    })
}

/// Shorthands for literal arguments.
pub mod lit {
    use super::SArg;
    use thunder_core::ir::Arg;
    use thunder_core::{DType, Device};

    pub fn int(i: i64) -> SArg {
        SArg::Lit(Arg::Int(i))
    }
    pub fn float(x: f64) -> SArg {
        SArg::Lit(Arg::Float(x))
    }
    pub fn boolean(b: bool) -> SArg {
        SArg::Lit(Arg::Bool(b))
    }
    pub fn ints(v: &[i64]) -> SArg {
        SArg::Lit(Arg::Ints(v.to_vec()))
    }
    pub fn dtype(d: DType) -> SArg {
        SArg::Lit(Arg::DType(d))
    }
    pub fn cpu() -> SArg {
        SArg::Lit(Arg::Device(Device::Cpu))
    }
    pub fn string(s: &str) -> SArg {
        SArg::Lit(Arg::Str(s.to_string()))
    }
    pub fn none() -> SArg {
        SArg::Lit(Arg::None)
    }
}
