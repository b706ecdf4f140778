//! Operand and output layouts: the chains of `prims.transpose` and `prims.reshape` that a
//! product reads or writes in place, and the strided matrix each chain gives cuBLASLt.
//!
//! A linear layer decomposes to `matmul(reshape(x, [B*T, C]), transpose(w))` and its VJP to
//! `matmul(g, transpose(transpose(w)))` and `transpose(matmul(transpose(reshape(x)), g))`.
//! Every one of those transposes and reshapes is only a different reading of a contiguous
//! buffer. Each chain is followed as a strided view (shape and strides, as torch's `view`
//! computes them), and the product takes the chain when the view it ends with is a matrix with
//! one unit stride and its batch dims fold into one strided batch, which is what a cuBLASLt
//! matrix layout can describe. An output chain is read backwards from the contiguous buffer it
//! ends in: an output stored transposed is the product of the transposed operands swapped,
//! `(A B)^T = B^T A^T`.

use crate::shape::Gemm;
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use thunder_abi::prims::Prim;
use thunder_abi::{ArgView, OpView, TraceView};

/// A strided view of a contiguous buffer, in elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
}

impl View {
    pub fn contiguous(shape: &[i64]) -> View {
        let mut strides = vec![1i64; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1].max(1);
        }
        View {
            shape: shape.to_vec(),
            strides,
        }
    }

    /// `prims.transpose(x, perm)`: dim `i` of the result is dim `perm[i]` of `x`.
    pub fn permute(&self, perm: &[i64]) -> Option<View> {
        if perm.len() != self.shape.len() {
            return None;
        }
        let mut seen = vec![false; perm.len()];
        let mut out = View {
            shape: Vec::with_capacity(perm.len()),
            strides: Vec::with_capacity(perm.len()),
        };
        for &p in perm {
            let p = usize::try_from(p).ok().filter(|&p| p < seen.len())?;
            if std::mem::replace(&mut seen[p], true) {
                return None;
            }
            out.shape.push(self.shape[p]);
            out.strides.push(self.strides[p]);
        }
        Some(out)
    }

    /// `prims.reshape(x, shape)` as a view of the same memory, or `None` when it would need a
    /// copy (ATen's `computeStride`: each run of input dims that are contiguous with each other
    /// may be regrouped freely; no output dim may span two runs).
    pub fn reshape(&self, shape: &[i64]) -> Option<View> {
        // Only views of positive dims are read by a product.
        let dims = |s: &[i64]| -> Option<Vec<usize>> {
            s.iter()
                .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
                .collect()
        };
        if self.shape.is_empty() {
            return None;
        }
        let strides =
            thunder_abi::strides::reshape(&dims(&self.shape)?, &self.strides, &dims(shape)?)?;
        Some(View {
            shape: shape.to_vec(),
            strides,
        })
    }
}

/// How a batch of logical `rows x cols` matrices lies in memory. Row-major: element `(i, j)`
/// of batch `b` is at `b * batch_stride + i * ld + j`; transposed (column-major): at
/// `b * batch_stride + j * ld + i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operand {
    pub transposed: bool,
    pub ld: u64,
    pub batch_stride: u64,
}

impl Operand {
    /// A contiguous row-major batch of `rows x cols` matrices.
    pub fn row_major(rows: u64, cols: u64) -> Operand {
        Operand {
            transposed: false,
            ld: cols,
            batch_stride: rows * cols,
        }
    }

    /// The same memory read as the transposed matrix.
    pub fn flipped(self) -> Operand {
        Operand {
            transposed: !self.transposed,
            ..self
        }
    }
}

/// The matrix layout of `view` (`[batch..., rows, cols]`), if cuBLASLt can read it: one of the
/// two matrix dims has unit stride, the other a leading dim at least as large as the first one's
/// size, and the batch dims fold into one stride.
pub fn matrix(view: &View) -> Option<Operand> {
    let r = view.shape.len();
    if r < 2 {
        return None;
    }
    let (rows, cols) = (view.shape[r - 2], view.shape[r - 1]);
    let (sr, sc) = (view.strides[r - 2], view.strides[r - 1]);
    if rows <= 0 || cols <= 0 {
        return None;
    }
    let (transposed, ld) = if sc == 1 || cols == 1 {
        (false, if rows == 1 { cols } else { sr })
    } else if sr == 1 || rows == 1 {
        (true, if cols == 1 { rows } else { sc })
    } else {
        return None;
    };
    let min_ld = if transposed { rows } else { cols };
    if ld < min_ld.max(1) {
        return None;
    }
    // Batch dims of size 1 take no stride; the others must nest as one contiguous index.
    let batch: Vec<(i64, i64)> = (0..r - 2)
        .filter(|&i| view.shape[i] != 1)
        .map(|i| (view.shape[i], view.strides[i]))
        .collect();
    if batch.windows(2).any(|w| w[0].1 != w[1].1 * w[1].0) {
        return None;
    }
    let batch_stride = match batch.last() {
        Some(&(_, s)) if s > 0 => s as u64,
        Some(_) => return None,
        None => (rows * cols) as u64,
    };
    Some(Operand {
        transposed,
        ld: ld as u64,
        batch_stride,
    })
}

/// One layout op of a chain, as the view it applies.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Permute(Vec<i64>),
    Reshape(Vec<i64>),
}

fn step_of(op: &OpView) -> Option<Step> {
    let ints = |i: usize| match op.args.get(i) {
        Some(ArgView::Ints(v)) => Some(v.to_vec()),
        _ => None,
    };
    if op.outputs.len() != 1 || op.input_values().count() != 1 {
        return None;
    }
    match op.symbol.as_str() {
        s if s == Prim::Transpose.id() => Some(Step::Permute(ints(1)?)),
        s if s == Prim::Reshape.id() => Some(Step::Reshape(ints(1)?)),
        _ => None,
    }
}

fn apply(view: &View, step: &Step) -> Option<View> {
    match step {
        Step::Permute(p) => view.permute(p),
        Step::Reshape(s) => view.reshape(s),
    }
}

/// Who produces and who reads each value of a view.
pub struct Uses {
    producer: HashMap<u32, u32>,
    /// How many op arguments read each value.
    readers: HashMap<u32, usize>,
    /// The op reading each value, for values read once.
    reader: HashMap<u32, u32>,
    outputs: HashSet<u32>,
}

/// [`Uses::of`] `view`, kept for the next call on the same view. The host compiles every
/// region of a partition against one view: a GPT-2 backward's hundred products each rebuilt
/// the maps over its thousands of ops. The key is the view's whole dataflow (every op's
/// outputs and inputs, in order), so a different view never gets another's maps.
pub fn uses_of(view: &TraceView) -> Arc<Uses> {
    static LAST: Mutex<Option<(u64, Arc<Uses>)>> = Mutex::new(None);
    let key = dataflow_key(view);
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, uses)) = last.as_ref().filter(|(k, _)| *k == key) {
        return uses.clone();
    }
    let uses = Arc::new(Uses::of(view));
    *last = Some((key, uses.clone()));
    uses
}

/// A hash of which op writes and reads which value (and of the trace's outputs): all that
/// [`Uses`] is built from.
fn dataflow_key(view: &TraceView) -> u64 {
    let mut h = DefaultHasher::new();
    (view.ops.len(), view.values.len()).hash(&mut h);
    view.outputs.as_slice().hash(&mut h);
    for op in view.ops.iter() {
        op.outputs.as_slice().hash(&mut h);
        // Separates one op's outputs from its inputs and from the next op.
        u32::MAX.hash(&mut h);
        for v in op.input_values() {
            v.hash(&mut h);
        }
        (u32::MAX - 1).hash(&mut h);
    }
    h.finish()
}

impl Uses {
    pub fn of(view: &TraceView) -> Uses {
        let mut u = Uses {
            producer: HashMap::new(),
            readers: HashMap::new(),
            reader: HashMap::new(),
            outputs: view.outputs.iter().copied().collect(),
        };
        for (i, op) in view.ops.iter().enumerate() {
            for &o in op.outputs.iter() {
                u.producer.insert(o, i as u32);
            }
            for v in op.input_values() {
                *u.readers.entry(v).or_default() += 1;
                u.reader.insert(v, i as u32);
            }
        }
        u
    }

    /// The op that alone reads `v`, when `v` is read by exactly one argument of one op and is
    /// not a trace output.
    fn only_reader(&self, v: u32) -> Option<u32> {
        (self.readers.get(&v) == Some(&1) && !self.outputs.contains(&v))
            .then(|| self.reader.get(&v).copied())
            .flatten()
    }
}

/// The layout ops that produce `v` and may be folded into its one reader: each is a
/// transpose or reshape that `take` accepts, whose output is read once and is not a trace
/// output. Nearest first.
fn chain_back(
    view: &TraceView,
    uses: &Uses,
    mut v: u32,
    take: &dyn Fn(u32) -> bool,
) -> Vec<(u32, Step)> {
    let mut chain = Vec::new();
    while let Some(&p) = uses.producer.get(&v) {
        let op = &view.ops[p as usize];
        let Some(step) = step_of(op).filter(|_| take(p) && uses.only_reader(v).is_some()) else {
            break;
        };
        chain.push((p, step));
        match op.input_values().next() {
            Some(x) => v = x,
            None => break,
        }
    }
    chain
}

/// An operand read through the longest foldable suffix of its chain: the ops taken, the
/// buffer read (the chain's root) and its layout as a `rows x cols` matrix.
fn operand_of(
    view: &TraceView,
    uses: &Uses,
    v: u32,
    take: &dyn Fn(u32) -> bool,
) -> Option<(Vec<u32>, u32, Operand)> {
    let chain = chain_back(view, uses, v, take);
    // Try the whole chain first, then shorter ones; the empty chain is the value itself.
    for start in 0..=chain.len() {
        let kept = &chain[..chain.len() - start];
        let root = match kept.last() {
            Some((p, _)) => view.ops[*p as usize].input_values().next()?,
            None => v,
        };
        let mut at = View::contiguous(&view.values.get(root as usize)?.shape);
        let mut ok = true;
        for (_, step) in kept.iter().rev() {
            match apply(&at, step) {
                Some(next) => at = next,
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if let Some(layout) = matrix(&at).filter(|_| ok) {
            return Some((kept.iter().map(|(p, _)| *p).collect(), root, layout));
        }
    }
    None
}

/// The layout ops that read the product's output and may write it in place, as for
/// `chain_back`. In trace order.
fn chain_forward(
    view: &TraceView,
    uses: &Uses,
    mut v: u32,
    take: &dyn Fn(u32) -> bool,
) -> Vec<(u32, Step)> {
    let mut chain = Vec::new();
    while let Some(r) = uses.only_reader(v) {
        let op = &view.ops[r as usize];
        let Some(step) = step_of(op).filter(|_| take(r)) else {
            break;
        };
        chain.push((r, step));
        v = op.outputs[0];
    }
    chain
}

/// The product's output written through the longest foldable prefix of its output chain: the
/// ops taken, the value written and the layout of the product's `[batch..., m, n]` result
/// inside that value's contiguous buffer.
fn output_of(
    view: &TraceView,
    uses: &Uses,
    v: u32,
    take: &dyn Fn(u32) -> bool,
) -> Option<(Vec<u32>, u32, Operand)> {
    let chain = chain_forward(view, uses, v, take);
    let product_shape = &view.values.get(v as usize)?.shape;
    for end in (0..=chain.len()).rev() {
        let kept = &chain[..end];
        let written = kept
            .last()
            .map_or(v, |(r, _)| view.ops[*r as usize].outputs[0]);
        // Undo the chain from the written buffer back to the product.
        let mut at = View::contiguous(&view.values.get(written as usize)?.shape);
        let mut ok = true;
        for (i, (_, step)) in kept.iter().enumerate().rev() {
            let before = match i {
                0 => product_shape.to_vec(),
                _ => view
                    .values
                    .get(view.ops[kept[i - 1].0 as usize].outputs[0] as usize)?
                    .shape
                    .to_vec(),
            };
            let undone = match step {
                Step::Permute(p) => {
                    let mut inv = vec![0i64; p.len()];
                    for (i, &d) in p.iter().enumerate() {
                        *inv.get_mut(usize::try_from(d).ok()?)? = i as i64;
                    }
                    at.permute(&inv)
                }
                Step::Reshape(_) => at.reshape(&before),
            };
            match undone {
                Some(next) => at = next,
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if let Some(layout) = matrix(&at).filter(|_| ok) {
            return Some((kept.iter().map(|(r, _)| *r).collect(), written, layout));
        }
    }
    None
}

/// One product with the layout ops folded into it: what to claim and how to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub gemm: Gemm,
    /// The buffers read as the left and right operand (chain roots; swapped when the output
    /// is stored transposed) and the bias, as trace values.
    pub lhs: u32,
    pub rhs: u32,
    pub bias: Option<u32>,
    /// The value written.
    pub out: u32,
    /// Every op of the region, in trace order.
    pub ops: Vec<u32>,
}

/// The plan of the `prims.matmul` at op `i`, folding the operand and output chains whose ops
/// `take` accepts (the claim offers every unclaimed op; compile offers the region's ops).
pub fn plan_matmul(
    view: &TraceView,
    uses: &Uses,
    i: u32,
    take: &dyn Fn(u32) -> bool,
) -> Option<Plan> {
    let op = view.ops.get(i as usize)?;
    let gemm = crate::shape::gemm_of(view, op)?;
    if op.symbol.as_str() != Prim::Matmul.id() {
        return None;
    }
    let mut args = op.input_values();
    let (a, b) = (args.next()?, args.next()?);
    // `matmul(t, t)`: the value is read twice, so no chain is taken and both read it as is.
    let (a_ops, a_root, a_layout) = operand_of(view, uses, a, take)?;
    let (b_ops, b_root, b_layout) = operand_of(view, uses, b, take)?;
    let (o_ops, out, o_layout) = output_of(view, uses, op.outputs[0], take)?;
    let mut gemm = Gemm {
        lhs: a_layout,
        rhs: b_layout,
        out: o_layout,
        ..gemm
    };
    let (mut lhs, mut rhs) = (a_root, b_root);
    if o_layout.transposed {
        // out^T = rhs^T lhs^T, written row-major.
        gemm = Gemm {
            m: gemm.n,
            n: gemm.m,
            lhs: b_layout.flipped(),
            rhs: a_layout.flipped(),
            out: o_layout.flipped(),
            ..gemm
        };
        std::mem::swap(&mut lhs, &mut rhs);
    }
    let mut ops: Vec<u32> = a_ops.into_iter().chain(b_ops).chain(o_ops).collect();
    ops.push(i);
    ops.sort_unstable();
    ops.dedup();
    Some(Plan {
        gemm,
        lhs,
        rhs,
        bias: None,
        out,
        ops,
    })
}
