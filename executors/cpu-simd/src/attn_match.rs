//! Finding attention in a region: the decomposition that `ltorch.scaled_dot_product_attention`
//! (and attention written out by hand, or imported from ONNX) leaves in a trace,
//!
//! ```text
//! s = matmul(q, kt)                      # [..., L, S]
//! s = mul(s, scale) | div(s, c)          # optional
//! x = where(keep, s, -inf) | add(s, m)   # optional: a b8 or an additive mask
//! m = amax(x, [last]);  mb = broadcast(reshape(m))
//! e = exp(sub(x, mb))
//! z = sum(e, [last]);   zb = broadcast(reshape(z))
//! o = matmul(div(e, zb), v)
//! ```
//!
//! is run by one fused kernel (`attn.rs`) when none of the intermediates is read outside the
//! chain (so the `[..., L, S]` scores never need to exist). A chain with an intermediate that
//! something else reads (a residual saved for a backward pass) is left to the ordinary stages.

use crate::decode::{Decoded, Lit, Op, Operand, Ty};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum MaskKind {
    /// Keep the score where true, this value (usually -inf) elsewhere.
    Keep(f64),
    /// Added to the scaled scores.
    Add,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttnMatch {
    /// Positions (in the region's op list) of every op the kernel replaces.
    pub(crate) ops: HashSet<usize>,
    /// Position of the final matmul, where the kernel's stage is scheduled.
    pub(crate) at: usize,
    pub(crate) q: u32,
    pub(crate) kt: u32,
    pub(crate) v: u32,
    /// `Some((factor, divide))`: scores times `factor`, or divided by it when `divide`.
    pub(crate) scale: Option<(f64, bool)>,
    pub(crate) mask: Option<(MaskKind, u32)>,
    pub(crate) out: u32,
}

struct Finder<'a> {
    ops: &'a [Decoded],
    /// Value id -> position of the op producing it.
    producer: HashMap<u32, usize>,
    /// Value id -> number of reads by ops of the region (plus one if a region output).
    reads: HashMap<u32, usize>,
}

/// Every attention chain in `ops` (a region's decoded ops in order) whose intermediates only
/// feed the chain. `outputs` are the region's outputs.
pub(crate) fn find(ops: &[Decoded], outputs: &[u32]) -> Vec<AttnMatch> {
    let mut producer = HashMap::new();
    let mut reads: HashMap<u32, usize> = HashMap::new();
    for (i, d) in ops.iter().enumerate() {
        producer.insert(d.out, i);
        for v in inputs_of(&d.op) {
            *reads.entry(v).or_default() += 1;
        }
    }
    for &o in outputs {
        *reads.entry(o).or_default() += 1;
    }
    let f = Finder {
        ops,
        producer,
        reads,
    };
    let mut found: Vec<AttnMatch> = Vec::new();
    for (i, d) in ops.iter().enumerate() {
        if let Some(m) = f.match_at(i, d) {
            if found.iter().all(|o| o.ops.is_disjoint(&m.ops)) {
                found.push(m);
            }
        }
    }
    found
}

pub(crate) fn inputs_of(op: &Op) -> Vec<u32> {
    let val = |o: &Operand| match o {
        Operand::Val(v) => Some(*v),
        Operand::Lit(_) => None,
    };
    match op {
        Op::Unary { a, .. }
        | Op::Convert { a }
        | Op::Broadcast { a, .. }
        | Op::Reshape { a }
        | Op::Transpose { a, .. }
        | Op::Slice { a, .. }
        | Op::Pad { a, .. }
        | Op::Reduce { a, .. } => vec![*a],
        Op::Binary { a, b, .. } | Op::Compare { a, b, .. } => {
            [val(a), val(b)].into_iter().flatten().collect()
        }
        Op::Where { pred, a, b } => [Some(*pred), val(a), val(b)]
            .into_iter()
            .flatten()
            .collect(),
        Op::Matmul { a, b } | Op::Take { a, index: b, .. } => vec![*a, *b],
        Op::IndexAdd { a, index, src, .. } => vec![*a, *index, *src],
        Op::Conv { a, w, bias, .. } => [Some(*a), Some(*w), *bias].into_iter().flatten().collect(),
        Op::Cat { parts, .. } => parts.clone(),
        Op::Full { .. } | Op::Iota { .. } => vec![],
    }
}

impl Finder<'_> {
    /// The op producing `v`, when only one op of the region reads `v`.
    fn sole(&self, v: u32) -> Option<(usize, &Decoded)> {
        self.only_read_by(v, 1)
    }

    /// The op producing `v`, when exactly `n` reads of `v` exist (all in the chain).
    fn only_read_by(&self, v: u32, n: usize) -> Option<(usize, &Decoded)> {
        if self.reads.get(&v).copied().unwrap_or(0) != n {
            return None;
        }
        let &i = self.producer.get(&v)?;
        Some((i, &self.ops[i]))
    }

    /// `b` = broadcast(reshape(r)) or broadcast(r) of a row statistic `r` ([..., L]) to the
    /// scores' shape [..., L, S]: returns `r` and the positions of the ops between.
    fn row_broadcast(&self, b: u32, scores: &[usize]) -> Option<(u32, Vec<usize>)> {
        let rank = scores.len();
        let (ib, db) = self.sole(b)?;
        let Op::Broadcast { a, dims } = &db.op else {
            return None;
        };
        if db.shape != scores {
            return None;
        }
        let (mut src, mut ops) = (*a, vec![ib]);
        if dims.len() == rank && dims.iter().enumerate().all(|(i, &d)| i == d) {
            // From [..., L, 1] through a reshape of [..., L].
            let (ir, dr) = self.sole(src)?;
            let Op::Reshape { a } = &dr.op else {
                return None;
            };
            if dr.shape[..rank - 1] != scores[..rank - 1] || dr.shape[rank - 1] != 1 {
                return None;
            }
            ops.push(ir);
            src = *a;
        } else if !(dims.len() == rank - 1 && dims.iter().enumerate().all(|(i, &d)| i == d)) {
            return None;
        }
        Some((src, ops))
    }

    /// `r` = reduce(`op`, x, [last]) read only by the broadcast: returns x.
    fn row_reduce(&self, r: u32, want: ReduceOp, rank: usize) -> Option<(usize, u32)> {
        let (i, d) = self.sole(r)?;
        match &d.op {
            Op::Reduce { op, a, dims } if *op == want && dims.as_slice() == [rank - 1] => {
                Some((i, *a))
            }
            _ => None,
        }
    }

    fn match_at(&self, at: usize, d: &Decoded) -> Option<AttnMatch> {
        let Op::Matmul { a: p, b: v } = d.op else {
            return None;
        };
        if d.ty != Ty::F32 {
            return None;
        }
        let mut ops: HashSet<usize> = HashSet::from([at]);
        // p = e / zb
        let (ip, dp) = self.sole(p)?;
        let Op::Binary {
            op: BinaryOp::Div,
            a: Operand::Val(e),
            b: Operand::Val(zb),
        } = dp.op
        else {
            return None;
        };
        let scores = dp.shape.clone();
        let rank = scores.len();
        if rank < 2 {
            return None;
        }
        ops.insert(ip);
        let (z, zops) = self.row_broadcast(zb, &scores)?;
        ops.extend(zops);
        let (iz, e2) = self.row_reduce(z, ReduceOp::Sum, rank)?;
        ops.insert(iz);
        if e2 != e {
            return None;
        }
        // e = exp(x - mb), read by the sum and the division.
        let (ie, de) = self.only_read_by(e, 2)?;
        let Op::Unary {
            op: UnaryOp::Exp,
            a: diff,
        } = de.op
        else {
            return None;
        };
        ops.insert(ie);
        let (idf, ddf) = self.sole(diff)?;
        let Op::Binary {
            op: BinaryOp::Sub,
            a: Operand::Val(x),
            b: Operand::Val(mb),
        } = ddf.op
        else {
            return None;
        };
        ops.insert(idf);
        let (m, mops) = self.row_broadcast(mb, &scores)?;
        ops.extend(mops);
        let (im, x2) = self.row_reduce(m, ReduceOp::Amax, rank)?;
        ops.insert(im);
        if x2 != x {
            return None;
        }
        // x: the masked scores, read by the max and the subtraction.
        let (ix, dx) = self.only_read_by(x, 2)?;
        let (mask, scaled) = match dx.op {
            Op::Where {
                pred,
                a: Operand::Val(s),
                b: Operand::Lit(Lit::F(fill)),
            } => {
                ops.insert(ix);
                (Some((MaskKind::Keep(fill), pred)), s)
            }
            Op::Binary {
                op: BinaryOp::Add,
                a: Operand::Val(s),
                b: Operand::Val(mask),
            } if self.is_scores(s) => {
                ops.insert(ix);
                (Some((MaskKind::Add, mask)), s)
            }
            Op::Binary {
                op: BinaryOp::Add,
                a: Operand::Val(mask),
                b: Operand::Val(s),
            } if self.is_scores(s) => {
                ops.insert(ix);
                (Some((MaskKind::Add, mask)), s)
            }
            _ => (None, x),
        };
        let reads_of_scaled = if mask.is_some() { 1 } else { 2 };
        let (is, ds) = self.only_read_by(scaled, reads_of_scaled)?;
        let (scale, raw) = match ds.op {
            Op::Binary {
                op: op @ (BinaryOp::Mul | BinaryOp::Div),
                a: Operand::Val(s),
                b: Operand::Lit(Lit::F(c)),
            } => {
                ops.insert(is);
                (Some((c, op == BinaryOp::Div)), s)
            }
            Op::Binary {
                op: BinaryOp::Mul,
                a: Operand::Lit(Lit::F(c)),
                b: Operand::Val(s),
            } => {
                ops.insert(is);
                (Some((c, false)), s)
            }
            _ => (None, scaled),
        };
        let reads_of_raw = if scale.is_some() || mask.is_some() {
            1
        } else {
            2
        };
        let (iq, dq) = self.only_read_by(raw, reads_of_raw)?;
        let Op::Matmul { a: q, b: kt } = dq.op else {
            return None;
        };
        if dq.ty != Ty::F32 || dq.shape != scores {
            return None;
        }
        ops.insert(iq);
        Some(AttnMatch {
            ops,
            at,
            q,
            kt,
            v,
            scale,
            mask,
            out: d.out,
        })
    }

    /// Whether `s` is a product `matmul(...)` or a scaled one (the scores side of an add).
    fn is_scores(&self, s: u32) -> bool {
        let Some(&i) = self.producer.get(&s) else {
            return false;
        };
        match &self.ops[i].op {
            Op::Matmul { .. } => true,
            Op::Binary {
                op: BinaryOp::Mul | BinaryOp::Div,
                a: Operand::Val(inner),
                b: Operand::Lit(_),
            } => self
                .producer
                .get(inner)
                .is_some_and(|&j| matches!(self.ops[j].op, Op::Matmul { .. })),
            _ => false,
        }
    }
}

impl crate::plan::Planner {
    /// Schedules a matched chain as one fused stage producing `m.out`.
    pub(crate) fn add_attention(
        &mut self,
        m: &AttnMatch,
        out: &Decoded,
    ) -> Result<(), thunder_abi::PluginError> {
        let q_shape = self.val(m.q)?.shape.clone();
        let kt_shape = self.val(m.kt)?.shape.clone();
        let r = q_shape.len();
        let q = self.materialize(m.q)?;
        let kt = self.materialize(m.kt)?;
        let v = self.materialize(m.v)?;
        let mask = match m.mask {
            Some((kind, id)) => {
                let (buf, layout) = self.materialize(id)?;
                Some((kind, buf, layout))
            }
            None => None,
        };
        let (buf, layout) = self.out_view(out.out, out.ty, &out.shape);
        self.stages
            .push(crate::stages::Stage::Attn(crate::attn::AttnPlan {
                q,
                kt,
                v,
                mask,
                causal: false,
                out: (buf, layout.clone()),
                lse: None,
                batch: q_shape[..r - 2].to_vec(),
                l: q_shape[r - 2],
                s: kt_shape[r - 1],
                d: q_shape[r - 1],
                dv: out.shape[r - 1],
                scale: m.scale.map(|(f, divide)| (f as f32, divide)),
            }));
        self.producer.insert(buf, self.stages.len() - 1);
        self.define(out, None, Some((buf, layout)), None);
        Ok(())
    }
}
