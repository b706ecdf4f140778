//! GELU as exporters spell it, found in a group's instructions so that the group runs as a
//! chain (`chain::Step::Gelu`) rather than as a program. A GELU reads its input more than
//! once, so the chain builder alone sees no single running value and the group would run on
//! the program's register file in memory, which is bound by its loads and stores (GPT-2's
//! tanh form over `[128, 3072]` took about 3 cycles an element a thread). As one step its
//! operations stay in vector registers.
//!
//! The fused step computes the same operations in the same order as the instructions it
//! replaces (add and multiply are commutative in IEEE arithmetic, so operand order is free;
//! every other choice is matched exactly), with the literals the file holds: which path runs
//! a group never changes its result. This is what ONNX Runtime's `FastGeluFusion` and
//! `BiasGeluFusion` do to the same graphs, done here on the group's instructions instead.

use crate::chain::Gelu;
use crate::decode::Ty;
use crate::group::{Ins, Src};
use crate::ops::{BinaryOp, UnaryOp};

/// An item of a fused instruction list: an instruction (registers renamed to SSA values), or
/// a GELU of SSA value `a` into `dst`.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    Ins(Ins),
    Gelu { dst: u32, a: u32, form: Gelu },
}

/// A pattern over the instruction graph: the GELU's input, literal number `k`, or an op on
/// sub-patterns (add and multiply match either operand order).
enum P {
    Y,
    L(usize),
    U(UnaryOp, &'static P),
    B(BinaryOp, &'static P, &'static P),
}

use BinaryOp::{Add, Div, Mul};
use P::{B, L, U, Y};

/// GPT-2's `0.5 * y * (1 + tanh(sqrt(2 / pi) * (y + 0.044715 * y^3)))`, with `Pow(y, 3)` as
/// the importer writes it, `(y * y) * y`: literals `[0.5, 0.044715, sqrt(2 / pi), 1]`.
const TANH_GELU: P = B(
    Mul,
    &B(Mul, &Y, &L(0)),
    &B(
        Add,
        &U(
            UnaryOp::Tanh,
            &B(
                Mul,
                &B(Add, &Y, &B(Mul, &B(Mul, &B(Mul, &Y, &Y), &Y), &L(1))),
                &L(2),
            ),
        ),
        &L(3),
    ),
);

/// BERT's `(y * (1 + erf(y / sqrt 2))) * 0.5`: literals `[sqrt 2, 1, 0.5]`.
const ERF_GELU: P = B(
    Mul,
    &B(
        Mul,
        &Y,
        &B(Add, &U(UnaryOp::Erf, &B(Div, &Y, &L(0))), &L(1)),
    ),
    &L(2),
);

/// What an SSA value is.
#[derive(Clone, Copy)]
enum Def {
    Load,
    Un(UnaryOp, u32),
    Bin(BinaryOp, Src, Src),
}

/// What a pattern bound: the input, the literals and the values inside it.
#[derive(Clone, Default)]
struct Bind {
    y: Option<u32>,
    lits: [Option<f32>; 4],
    inner: Vec<u32>,
}

struct Graph {
    defs: Vec<Option<Def>>,
    /// How many instructions read each value (stores included).
    uses: Vec<u32>,
}

impl Graph {
    fn matches(&self, p: &P, v: Src, b: &mut Bind) -> bool {
        match (p, v) {
            (P::Y, Src::Reg(r)) => *b.y.get_or_insert(r) == r,
            (P::L(k), Src::Lit(l)) => match crate::chain::lit_f32(l) {
                Some(c) => b.lits[*k].get_or_insert(c).to_bits() == c.to_bits(),
                None => false,
            },
            (P::U(op, a), Src::Reg(r)) => match self.defs[r as usize] {
                Some(Def::Un(o, x)) if o == *op => {
                    b.inner.push(r);
                    self.matches(a, Src::Reg(x), b)
                }
                _ => false,
            },
            (P::B(op, pa, pb), Src::Reg(r)) => match self.defs[r as usize] {
                Some(Def::Bin(o, x, y)) if o == *op => {
                    let before = b.clone();
                    b.inner.push(r);
                    if self.matches(pa, x, b) && self.matches(pb, y, b) {
                        return true;
                    }
                    *b = before;
                    if !matches!(op, Add | Mul) {
                        return false;
                    }
                    b.inner.push(r);
                    self.matches(pa, y, b) && self.matches(pb, x, b)
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// The GELU rooted at value `r`, if every value inside it other than `r` is read only
    /// by it (so that dropping their instructions loses nothing).
    fn gelu_at(&self, r: u32) -> Option<(u32, Gelu, Vec<u32>)> {
        for (pat, make) in [
            (
                &TANH_GELU,
                (|c: [f32; 4]| Gelu::Tanh(c)) as fn([f32; 4]) -> Gelu,
            ),
            (&ERF_GELU, |c: [f32; 4]| Gelu::Erf([c[0], c[1], c[2]])),
        ] {
            let mut b = Bind::default();
            if !self.matches(pat, Src::Reg(r), &mut b) {
                continue;
            }
            b.inner.retain(|&v| v != r);
            if b.inner.iter().all(|&v| self.uses[v as usize] == 1) {
                let c = b.lits.map(|l| l.unwrap_or(0.0));
                return Some((b.y?, make(c), b.inner));
            }
        }
        None
    }
}

/// The instructions with registers renamed to SSA values (f32 loads, stores, unary and
/// binary ops only: nothing else can be in a chain) and every GELU found replaced by one
/// item; `None` when there is no GELU or an instruction of another kind.
pub(crate) fn fuse_gelu(ins: &[Ins]) -> Option<Vec<Item>> {
    let mut cur: Vec<u32> = Vec::new();
    let mut graph = Graph {
        defs: Vec::new(),
        uses: Vec::new(),
    };
    let mut ssa = Vec::with_capacity(ins.len());
    for i in ins {
        let f32_chain_op = matches!(
            i,
            Ins::Load { ty: Ty::F32, .. }
                | Ins::Unary { ty: Ty::F32, .. }
                | Ins::Binary { ty: Ty::F32, .. }
                | Ins::Store { ty: Ty::F32, .. }
        );
        if !f32_chain_op {
            return None;
        }
        let mut i = i.clone();
        for r in i.regs_mut() {
            let v = cur.get(*r as usize).copied().filter(|&v| v != u32::MAX)?;
            graph.uses[v as usize] += 1;
            *r = v;
        }
        let v = graph.defs.len() as u32;
        let def = match &mut i {
            Ins::Load { dst, .. } => Some((std::mem::replace(dst, v), Def::Load)),
            Ins::Unary { op, dst, a, .. } => Some((std::mem::replace(dst, v), Def::Un(*op, *a))),
            Ins::Binary { op, dst, a, b, .. } => {
                Some((std::mem::replace(dst, v), Def::Bin(*op, *a, *b)))
            }
            _ => None,
        };
        if let Some((reg, def)) = def {
            graph.defs.push(Some(def));
            graph.uses.push(0);
            if cur.len() <= reg as usize {
                cur.resize(reg as usize + 1, u32::MAX);
            }
            cur[reg as usize] = v;
        }
        ssa.push(i);
    }
    // Roots from the last instruction back, so that an outer match is taken whole.
    let mut items: Vec<Option<Item>> = ssa.into_iter().map(|i| Some(Item::Ins(i))).collect();
    let mut found = false;
    for at in (0..items.len()).rev() {
        let dst = match &items[at] {
            Some(Item::Ins(Ins::Binary { dst, .. })) => *dst,
            _ => continue,
        };
        let Some((a, form, inner)) = graph.gelu_at(dst) else {
            continue;
        };
        found = true;
        items[at] = Some(Item::Gelu { dst, a, form });
        for it in items.iter_mut() {
            if let Some(Item::Ins(i)) = it {
                if i.dst().is_some_and(|(_, d)| inner.contains(&d)) {
                    *it = None;
                }
            }
        }
    }
    found.then(|| items.into_iter().flatten().collect())
}
