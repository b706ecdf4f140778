//! Splitting a claimed region into kernels.
//!
//! A kernel has a **domain**: the full shape `F` its elementwise work ranges over, and
//! optionally a set of reduced dims `D` of `F`. Its values live at one of two levels: *full*
//! (one per element of `F`) or *row* (one per element of `R`, `F` without `D`, after a
//! reduction). The generated code runs one "team" per row (a thread block when `D` are the
//! trailing dims, else a single thread), which loops over the row's elements once per
//! reduction and once more to store full outputs; row values between reductions stay in
//! registers. So softmax, layer_norm and cross_entropy become one kernel that reads each row
//! from memory once per stage (from L2 after the first) and writes only the outputs.
//!
//! Ops join the current kernel while they fit its domain; otherwise the kernel is closed and
//! the op starts the next one, and the values that cross become kernel outputs in device
//! memory. Broadcasts and reshapes of kernel inputs are folded into index maps.

use crate::support::Math;

mod demote;
mod layout;
mod reduction;
use thunder_abi::prims::{FactoryPrim, IndexingPrim, Prim, PrimClass, PrimKind, ReductionPrim};
use thunder_abi::{ArgView, DTypeCode, OpView, PluginError, TraceView};

pub type NodeId = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Full,
    Row,
}

/// A literal operand, already rounded to the dtype it is used at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Literal {
    Float(f64),
    Int(i64),
    Bool(bool),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Node(NodeId),
    Literal(Literal),
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    /// Element of kernel input `input` at `base + sum(coordinate * stride)` (one stride per dim
    /// of the level's shape; 0 where the input is broadcast, negative where it is flipped; the
    /// base is where a slice or a flip starts).
    Load {
        input: usize,
        base: i64,
        strides: Vec<i64>,
        /// Read only where every coordinate `i_d` is in `[lo_d, hi_d)` (0 elsewhere): the
        /// loads of a padded value, whose offsets would leave the input there.
        guard: Option<Vec<(i64, i64)>>,
    },
    /// Whether every coordinate `i_d` is in `[lo_d, hi_d)` (b8): the inside of a padding.
    InBounds(Vec<(i64, i64)>),
    /// `start + step * index`, the index read through `base` and `strides` like a load's offset.
    Iota {
        start: Literal,
        step: Literal,
        base: i64,
        strides: Vec<i64>,
    },
    Unary(Math, Operand),
    Binary(Math, Operand, Operand),
    Where(Operand, Operand, Operand),
    Convert(Operand),
    /// A reduction over the kernel's reduced dims (the `k`-th of the kernel).
    Reduce {
        fold: Fold,
        input: NodeId,
        k: usize,
    },
}

/// How a reduction combines elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    Sum,
    /// NaN-propagating maximum (amax).
    Max,
    /// NaN-propagating minimum (amin).
    Min,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    pub dtype: DTypeCode,
    pub level: Level,
}

/// A tensor a kernel reads: a region input or an earlier kernel's output.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelInput {
    pub value: u32,
    pub dtype: DTypeCode,
    /// Whether a later kernel of the region reads this value too (so it is worth keeping in
    /// cache: see `RowVector::stream_loads`).
    pub read_later: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KernelOutput {
    pub value: u32,
    pub node: NodeId,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub full_shape: Vec<i64>,
    /// Reduced dims of `full_shape`, ascending; empty for a pointwise kernel.
    pub reduced: Vec<usize>,
    pub inputs: Vec<KernelInput>,
    pub nodes: Vec<Node>,
    pub outputs: Vec<KernelOutput>,
    pub reductions: Vec<NodeId>,
}

impl Kernel {
    pub fn row_shape(&self) -> Vec<i64> {
        (0..self.full_shape.len())
            .filter(|d| !self.reduced.contains(d))
            .map(|d| self.full_shape[d])
            .collect()
    }

    /// `F` with the reduced dims kept as size 1 (what `keepdim` reductions produce).
    pub fn row_shape_keepdim(&self) -> Vec<i64> {
        self.full_shape
            .iter()
            .enumerate()
            .map(|(d, &n)| if self.reduced.contains(&d) { 1 } else { n })
            .collect()
    }

    /// Whether a tensor of `shape` holds one value per row (either spelling of `R`).
    pub fn is_row_shape(&self, shape: &[i64]) -> bool {
        !self.reduced.is_empty() && (self.row_shape() == shape || self.row_shape_keepdim() == shape)
    }

    pub fn level_shape(&self, level: Level) -> Vec<i64> {
        match level {
            Level::Full => self.full_shape.clone(),
            Level::Row => self.row_shape(),
        }
    }

    /// True when the reduced dims are the trailing dims of `F` (rows are contiguous runs).
    pub fn reduces_trailing(&self) -> bool {
        let n = self.full_shape.len();
        let k = self.reduced.len();
        k > 0 && self.reduced.iter().copied().eq(n - k..n)
    }
}

/// A value computed elementwise from tensors in memory, not placed in any kernel yet: it is
/// instantiated (with its loads re-indexed) wherever a kernel reads it, possibly broadcast, so
/// a weight converted to f32 and broadcast over a batch is read straight from memory.
#[derive(Debug, Clone, PartialEq)]
struct Expr {
    kind: ExprKind,
    dtype: DTypeCode,
}

#[derive(Debug, Clone, PartialEq)]
enum ExprKind {
    /// `value` read at `base + sum(coordinate * stride)` over the expression's shape.
    Load {
        value: u32,
        base: i64,
        strides: Vec<i64>,
    },
    Iota {
        start: Literal,
        step: Literal,
        base: i64,
        strides: Vec<i64>,
    },
    Lit(Literal),
    Unary(Math, Box<Expr>),
    Binary(Math, Box<Expr>, Box<Expr>),
    Where(Box<Expr>, Box<Expr>, Box<Expr>),
    Convert(Box<Expr>),
}

/// Maps a leaf's `(base, strides)` to new ones.
type Reindex<'a> = &'a dyn Fn(i64, &[i64]) -> (i64, Vec<i64>);

impl Expr {
    /// The same expression read through `f`, which maps a load's strides to new strides.
    fn restride(&self, f: &dyn Fn(&[i64]) -> Vec<i64>) -> Expr {
        self.reindex(&|base, strides| (base, f(strides)))
    }

    /// The same expression with every leaf read through `f`: an elementwise expression
    /// commutes with any re-indexing of its operands (permutations, slices, flips).
    fn reindex(&self, f: Reindex<'_>) -> Expr {
        let kind = match &self.kind {
            ExprKind::Load {
                value,
                base,
                strides,
            } => {
                let (base, strides) = f(*base, strides);
                ExprKind::Load {
                    value: *value,
                    base,
                    strides,
                }
            }
            ExprKind::Iota {
                start,
                step,
                base,
                strides,
            } => {
                let (base, strides) = f(*base, strides);
                ExprKind::Iota {
                    start: *start,
                    step: *step,
                    base,
                    strides,
                }
            }
            ExprKind::Lit(l) => ExprKind::Lit(*l),
            ExprKind::Unary(p, a) => ExprKind::Unary(*p, Box::new(a.reindex(f))),
            ExprKind::Binary(p, a, b) => {
                ExprKind::Binary(*p, Box::new(a.reindex(f)), Box::new(b.reindex(f)))
            }
            ExprKind::Where(c, a, b) => ExprKind::Where(
                Box::new(c.reindex(f)),
                Box::new(a.reindex(f)),
                Box::new(b.reindex(f)),
            ),
            ExprKind::Convert(a) => ExprKind::Convert(Box::new(a.reindex(f))),
        };
        Expr {
            kind,
            dtype: self.dtype,
        }
    }
}

#[derive(Debug, Clone)]
struct Pending {
    shape: Vec<i64>,
    expr: Expr,
}

/// Where a trace value lives while a region is planned.
#[derive(Debug, Clone)]
enum Home {
    /// In the open kernel, as this node.
    Node(NodeId),
    /// Not computed yet: instantiated by whichever kernel reads it.
    Pending(Pending),
    /// In device memory (region input or output of a closed kernel).
    Memory,
}

pub fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    strides
}

fn bad(op: &OpView, message: impl std::fmt::Display) -> PluginError {
    PluginError::invalid(format!("cuda-fuser: {}: {message}", op.symbol))
}

fn new_kernel(shape: &[i64]) -> Kernel {
    Kernel {
        full_shape: shape.to_vec(),
        reduced: Vec::new(),
        inputs: Vec::new(),
        nodes: Vec::new(),
        outputs: Vec::new(),
        reductions: Vec::new(),
    }
}

struct Planner<'a> {
    view: &'a TraceView,
    homes: std::collections::HashMap<u32, Home>,
    /// Values whose op has been planned (into a kernel or as pending).
    planned: std::collections::HashSet<u32>,
    /// The ops reading each value, so "is it read later" is a lookup, not a scan of the trace.
    readers: std::collections::HashMap<u32, Vec<usize>>,
    kernels: Vec<Kernel>,
    open: Option<Kernel>,
    /// Values whose data is in device memory already (region inputs read by a kernel, and
    /// outputs of closed kernels): a kernel that loads one never writes it back.
    stored: std::collections::HashSet<u32>,
}

/// Plans the kernels of a region. `outputs` are the region's outputs; values used by a later
/// kernel become outputs of the kernel computing them.
pub fn plan(view: &TraceView, ops: &[u32], outputs: &[u32]) -> Result<Vec<Kernel>, PluginError> {
    let mut p = Planner {
        view,
        homes: Default::default(),
        planned: Default::default(),
        readers: Default::default(),
        kernels: Vec::new(),
        open: None,
        stored: Default::default(),
    };
    for (i, op) in view.ops.iter().enumerate() {
        for v in op.input_values() {
            p.readers.entry(v).or_default().push(i);
        }
    }
    for &i in ops {
        let op = view.ops.get(i as usize).ok_or_else(|| {
            PluginError::invalid(format!("cuda-fuser: op {i} is not in the trace"))
        })?;
        if !p.try_add(op)? {
            p.close(outputs);
            if !p.try_add(op)? {
                return Err(bad(op, "cannot start a kernel with this op"));
            }
        }
        p.planned.extend(op.outputs.iter().copied());
    }
    p.close(outputs);
    p.materialize_pending(outputs);
    let mut kernels = p.kernels;
    for i in 0..kernels.len() {
        let (now, later) = kernels.split_at_mut(i + 1);
        for input in &mut now[i].inputs {
            input.read_later = later
                .iter()
                .any(|k| k.inputs.iter().any(|j| j.value == input.value));
        }
    }
    Ok(kernels)
}

impl Planner<'_> {
    fn shape(&self, v: u32) -> &[i64] {
        &self.view.values[v as usize].shape
    }

    fn dtype(&self, v: u32) -> DTypeCode {
        self.view.values[v as usize].dtype
    }

    /// Whether `v` must be in memory after planning: a region output, a trace output, or read
    /// by an op not planned yet (later in this region, or another executor's).
    fn needed_later(&self, v: u32, region_outputs: &[u32]) -> bool {
        region_outputs.contains(&v)
            || self.view.outputs.contains(&v)
            || self.readers.get(&v).is_some_and(|ops| {
                ops.iter().any(|&i| {
                    self.view.ops[i]
                        .outputs
                        .iter()
                        .all(|o| !self.planned.contains(o))
                })
            })
    }

    /// Closes the open kernel; every value it computed that is needed later becomes a kernel
    /// output, and so does every pending value of its shapes that is.
    fn close(&mut self, region_outputs: &[u32]) {
        self.absorb_pending_outputs(region_outputs);
        let Some(mut k) = self.open.take() else {
            return;
        };
        let computed: Vec<(u32, NodeId)> = self
            .homes
            .iter()
            .filter_map(|(&v, h)| match h {
                Home::Node(n) => Some((v, *n)),
                _ => None,
            })
            .collect();
        for (v, node) in computed {
            if self.needed_later(v, region_outputs) && !self.stored.contains(&v) {
                let shape = k.full_shape.clone();
                if let Some(expr) = self
                    .recomputable(&k, node)
                    .filter(|e| self.recompute_later(v, &shape, e, region_outputs))
                {
                    self.homes.insert(v, Home::Pending(Pending { shape, expr }));
                    continue;
                }
                k.outputs.push(KernelOutput { value: v, node });
            }
            self.stored.insert(v);
            self.homes.insert(v, Home::Memory);
        }
        k.outputs.sort_by_key(|o| o.value);
        self.kernels.push(k);
    }

    /// Adds the nodes computing `expr` at `level` of the open kernel.
    fn instantiate(&mut self, expr: &Expr, level: Level) -> Option<Operand> {
        self.instantiate_guarded(expr, level, None)
    }

    /// As [`Self::instantiate`], every load read only inside `guard` (see `NodeKind::Load`).
    fn instantiate_guarded(
        &mut self,
        expr: &Expr,
        level: Level,
        guard: Option<&Vec<(i64, i64)>>,
    ) -> Option<Operand> {
        let kind = match &expr.kind {
            ExprKind::Lit(l) => return Some(Operand::Literal(*l)),
            ExprKind::Load {
                value,
                base,
                strides,
            } => {
                return Some(Operand::Node(self.guarded_load(
                    *value,
                    *base,
                    strides.clone(),
                    guard.cloned(),
                    level,
                )))
            }
            ExprKind::Iota {
                start,
                step,
                base,
                strides,
            } => NodeKind::Iota {
                start: *start,
                step: *step,
                base: *base,
                strides: strides.clone(),
            },
            ExprKind::Unary(p, a) => {
                NodeKind::Unary(*p, self.instantiate_guarded(a, level, guard)?)
            }
            ExprKind::Binary(p, a, b) => NodeKind::Binary(
                *p,
                self.instantiate_guarded(a, level, guard)?,
                self.instantiate_guarded(b, level, guard)?,
            ),
            ExprKind::Where(c, a, b) => NodeKind::Where(
                self.instantiate_guarded(c, level, guard)?,
                self.instantiate_guarded(a, level, guard)?,
                self.instantiate_guarded(b, level, guard)?,
            ),
            ExprKind::Convert(a) => NodeKind::Convert(self.instantiate_guarded(a, level, guard)?),
        };
        Some(Operand::Node(self.node(kind, expr.dtype, level)?))
    }

    /// A node, shared with an identical one already in the kernel.
    fn node(&mut self, kind: NodeKind, dtype: DTypeCode, level: Level) -> Option<NodeId> {
        let k = self.open.as_mut()?;
        let node = Node { kind, dtype, level };
        if let Some(n) = k.nodes.iter().position(|x| *x == node) {
            return Some(n);
        }
        k.nodes.push(node);
        Some(k.nodes.len() - 1)
    }

    fn guarded_load(
        &mut self,
        v: u32,
        base: i64,
        strides: Vec<i64>,
        guard: Option<Vec<(i64, i64)>>,
        level: Level,
    ) -> NodeId {
        let dtype = self.dtype(v);
        let Some(k) = self.open.as_mut() else {
            return 0;
        };
        let input = match k.inputs.iter().position(|i| i.value == v) {
            Some(i) => i,
            None => {
                k.inputs.push(KernelInput {
                    value: v,
                    dtype,
                    read_later: false,
                });
                k.inputs.len() - 1
            }
        };
        self.node(
            NodeKind::Load {
                input,
                base,
                strides,
                guard,
            },
            dtype,
            level,
        )
        .unwrap_or(0)
    }

    /// `v` as an expression, if it is not a node of the open kernel.
    fn expr_of(&self, v: u32) -> Option<Expr> {
        match self.homes.get(&v) {
            Some(Home::Node(_)) => None,
            Some(Home::Pending(p)) => Some(p.expr.clone()),
            Some(Home::Memory) | None => Some(Expr {
                kind: ExprKind::Load {
                    value: v,
                    base: 0,
                    strides: contiguous_strides(self.shape(v)),
                },
                dtype: self.dtype(v),
            }),
        }
    }

    /// Strides over a value's own shape, restated over the dims of `level`'s shape (a
    /// keepdim-shaped row value drops its size-1 reduced dims).
    fn level_strides(&self, shape: &[i64], level: Level) -> impl Fn(&[i64]) -> Vec<i64> {
        let drop: Vec<usize> = match (&self.open, level) {
            (Some(k), Level::Row) if shape.len() == k.full_shape.len() => k.reduced.clone(),
            _ => Vec::new(),
        };
        move |s: &[i64]| {
            s.iter()
                .enumerate()
                .filter(|(d, _)| !drop.contains(d))
                .map(|(_, &x)| x)
                .collect()
        }
    }

    /// The operand for `v` at `level` in the open kernel.
    fn value_at(&mut self, v: u32, level: Level) -> Option<Operand> {
        let k = self.open.as_ref()?;
        let shape = self.shape(v).to_vec();
        let fits = match level {
            Level::Full => shape == k.full_shape,
            Level::Row => k.is_row_shape(&shape),
        };
        match self.homes.get(&v) {
            Some(Home::Node(n)) => {
                let n = *n;
                (k.nodes[n].level == level).then_some(Operand::Node(n))
            }
            _ if !fits => None,
            _ => {
                let expr = self.expr_of(v)?;
                let f = self.level_strides(&shape, level);
                let operand = self.instantiate(&expr.restride(&f), level)?;
                if let Operand::Node(n) = operand {
                    if level == Level::Full || shape == self.open.as_ref()?.row_shape() {
                        // Computed (or loaded) in this kernel now: later readers share the
                        // node. A loaded value stays where it is in memory.
                        if !matches!(self.homes.get(&v), Some(Home::Pending(_))) {
                            self.stored.insert(v);
                        }
                        self.homes.insert(v, Home::Node(n));
                    }
                }
                Some(operand)
            }
        }
    }

    fn literal(&self, arg: &ArgView, dtype: DTypeCode) -> Option<Literal> {
        match arg {
            ArgView::Float(x) => Some(Literal::Float(round_to(*x, dtype))),
            ArgView::Int(i) if dtype.is_float() => Some(Literal::Float(round_to(*i as f64, dtype))),
            ArgView::Int(i) => Some(Literal::Int(*i)),
            ArgView::Bool(b) => Some(Literal::Bool(*b)),
            _ => None,
        }
    }

    /// Adds `op`; false when it cannot join the open kernel (which is then closed).
    fn try_add(&mut self, op: &OpView) -> Result<bool, PluginError> {
        let prim = Prim::from_id(&op.symbol).ok_or_else(|| bad(op, "not a prim"))?;
        let out = *op.outputs.first().ok_or_else(|| bad(op, "no output"))?;
        let unclaimed = || Err(bad(op, "not a prim the fuser claims"));
        match prim.kind() {
            PrimKind::Factory(p) => self.add_factory(op, p, out),
            PrimKind::Reduction(p) => match p {
                ReductionPrim::Sum => self.add_reduction(op, Fold::Sum, out),
                ReductionPrim::Amax => self.add_reduction(op, Fold::Max, out),
                ReductionPrim::Amin => self.add_reduction(op, Fold::Min, out),
                ReductionPrim::Prod
                | ReductionPrim::Argmax
                | ReductionPrim::Argmin
                | ReductionPrim::VarMean => unclaimed(),
            },
            PrimKind::Shape(p) => self.add_shape(op, p, out),
            PrimKind::Unary(_)
            | PrimKind::Predicate(_)
            | PrimKind::Binary(_)
            | PrimKind::Compare(_)
            | PrimKind::Where(_)
            | PrimKind::Convert(_) => self.add_elementwise(op, prim, out),
            PrimKind::Indexing(p) => match p {
                IndexingPrim::Slice | IndexingPrim::Flip => self.add_reindex(op, p, out),
                IndexingPrim::Pad => self.add_pad(op, out),
                IndexingPrim::Cat => self.add_cat(op, out),
                IndexingPrim::Take
                | IndexingPrim::TakeAlongAxis
                | IndexingPrim::ScatterAdd
                | IndexingPrim::IndexAdd => unclaimed(),
            },
            PrimKind::Scan(_)
            | PrimKind::Sort(_)
            | PrimKind::Conv(_)
            | PrimKind::Random(_)
            | PrimKind::Matmul(_) => unclaimed(),
        }
    }

    fn add_elementwise(&mut self, op: &OpView, prim: Prim, out: u32) -> Result<bool, PluginError> {
        let out_shape = self.shape(out).to_vec();
        let out_dtype = self.dtype(out);
        // Operands are computed at the dtype of the first tensor operand (prims take operands
        // of one dtype; `where` takes it from its branches).
        let operand_dtype = match prim.class() {
            PrimClass::Where => op
                .args
                .iter()
                .skip(1)
                .find_map(ArgView::as_value)
                .map(|v| self.dtype(v))
                .unwrap_or(out_dtype),
            _ => op
                .input_values()
                .next()
                .map(|v| self.dtype(v))
                .unwrap_or(out_dtype),
        };
        // Claimed elementwise math always has a spelling for its operands (`support::accepts`).
        let math = || {
            Math::for_operands(prim, operand_dtype)
                .ok_or_else(|| bad(op, "no CUDA spelling for these operands"))
        };
        let n_args = if prim.class() == PrimClass::Convert {
            1
        } else {
            op.args.len()
        };
        let args = &op.args[..n_args.min(op.args.len())];
        let dtype_of = |i: usize| {
            if prim.class() == PrimClass::Where && i == 0 {
                DTypeCode::Bool
            } else {
                operand_dtype
            }
        };
        let in_kernel = args.iter().any(
            |a| matches!(a, ArgView::Value(v) if matches!(self.homes.get(v), Some(Home::Node(_)))),
        );
        if !in_kernel {
            // Only memory and pending operands: stay pending.
            let mut exprs = Vec::new();
            for (i, a) in args.iter().enumerate() {
                let e = match a {
                    ArgView::Value(v) => self.expr_of(*v).ok_or_else(|| bad(op, "operand lost"))?,
                    other => Expr {
                        kind: ExprKind::Lit(
                            self.literal(other, dtype_of(i))
                                .ok_or_else(|| bad(op, "unsupported literal"))?,
                        ),
                        dtype: dtype_of(i),
                    },
                };
                exprs.push(Box::new(e));
            }
            let kind = match (prim.class(), exprs.as_slice()) {
                (PrimClass::Unary | PrimClass::Predicate, [a]) => {
                    ExprKind::Unary(math()?, a.clone())
                }
                (PrimClass::Binary | PrimClass::Compare, [a, b]) => {
                    ExprKind::Binary(math()?, a.clone(), b.clone())
                }
                (PrimClass::Where, [c, a, b]) => ExprKind::Where(c.clone(), a.clone(), b.clone()),
                (PrimClass::Convert, [a]) => ExprKind::Convert(a.clone()),
                _ => return Err(bad(op, "unexpected arguments")),
            };
            self.homes.insert(
                out,
                Home::Pending(Pending {
                    shape: out_shape,
                    expr: Expr {
                        kind,
                        dtype: out_dtype,
                    },
                }),
            );
            return Ok(true);
        }
        let Some(level) = self.open.as_ref().and_then(|k| {
            if k.full_shape == out_shape {
                Some(Level::Full)
            } else if k.is_row_shape(&out_shape) {
                Some(Level::Row)
            } else {
                None
            }
        }) else {
            return Ok(false);
        };
        let mut operands = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let o = match a {
                ArgView::Value(v) => self.value_at(*v, level),
                other => self.literal(other, dtype_of(i)).map(Operand::Literal),
            };
            match o {
                Some(o) => operands.push(o),
                None => return Ok(false),
            }
        }
        let kind = match (prim.class(), operands.as_slice()) {
            (PrimClass::Unary | PrimClass::Predicate, [a]) => NodeKind::Unary(math()?, a.clone()),
            (PrimClass::Binary | PrimClass::Compare, [a, b]) => {
                NodeKind::Binary(math()?, a.clone(), b.clone())
            }
            (PrimClass::Where, [c, a, b]) => NodeKind::Where(c.clone(), a.clone(), b.clone()),
            (PrimClass::Convert, [a]) => NodeKind::Convert(a.clone()),
            _ => return Err(bad(op, "unexpected arguments")),
        };
        let n = self
            .node(kind, out_dtype, level)
            .ok_or_else(|| bad(op, "no open kernel"))?;
        self.homes.insert(out, Home::Node(n));
        Ok(true)
    }

    /// `full` and `iota` stay pending: a constant or an index ramp, computed by the kernels that
    /// read them (a one-hot or a causal mask costs no memory traffic).
    fn add_factory(
        &mut self,
        op: &OpView,
        prim: FactoryPrim,
        out: u32,
    ) -> Result<bool, PluginError> {
        let dtype = self.dtype(out);
        let shape = self.shape(out).to_vec();
        let kind = match prim {
            FactoryPrim::Full => ExprKind::Lit(
                op.args
                    .get(1)
                    .and_then(|a| self.literal(a, dtype))
                    .ok_or_else(|| bad(op, "fill value is not a number"))?,
            ),
            FactoryPrim::Iota => {
                let lit = |i: usize| op.args.get(i).and_then(|a| self.literal(a, dtype));
                ExprKind::Iota {
                    start: lit(1).ok_or_else(|| bad(op, "start is not a number"))?,
                    step: lit(2).ok_or_else(|| bad(op, "step is not a number"))?,
                    base: 0,
                    strides: contiguous_strides(&shape),
                }
            }
        };
        self.homes.insert(
            out,
            Home::Pending(Pending {
                shape,
                expr: Expr { kind, dtype },
            }),
        );
        Ok(true)
    }
}

/// A literal next to a tensor of `dtype` is first rounded to that dtype (the prim contract).
pub fn round_to(x: f64, dtype: DTypeCode) -> f64 {
    match dtype {
        DTypeCode::F16 => half::f16::from_f64(x).to_f64(),
        DTypeCode::BF16 => half::bf16::from_f64(x).to_f64(),
        DTypeCode::F32 => x as f32 as f64,
        _ => x,
    }
}
