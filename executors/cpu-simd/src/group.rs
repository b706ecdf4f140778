//! A fused group: elementwise ops (and the reductions of their results) over one iteration
//! space, built as SSA instructions while the region is scheduled and then lowered to a
//! register program over tile-sized scratch vectors and a compacted loop nest.

use crate::decode::{Lit, Ty};
use crate::layout::{Layout, Nest};
use crate::ops::{BinaryOp, CompareOp, ReduceOp, UnaryOp};
use std::collections::HashMap;

/// A buffer a region touches: the host's inputs and outputs, or scratch it allocates per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum BufId {
    Input(usize),
    Output(usize),
    Scratch(usize),
}

/// An instruction operand: a register or a literal (floats as f64, ints as i64).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Src {
    Reg(u32),
    Lit(Lit),
}

/// One instruction. Before lowering, register numbers are SSA values; after, they index the
/// register file of the instruction's type. `ty` is the type the instruction computes in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ins {
    Load {
        ty: Ty,
        dst: u32,
        acc: usize,
    },
    Splat {
        ty: Ty,
        dst: u32,
        value: Lit,
    },
    Unary {
        ty: Ty,
        op: UnaryOp,
        dst: u32,
        a: u32,
    },
    Binary {
        ty: Ty,
        op: BinaryOp,
        dst: u32,
        a: Src,
        b: Src,
    },
    /// Compares operands of type `ty` into a b8 register.
    Compare {
        ty: Ty,
        op: CompareOp,
        dst: u32,
        a: Src,
        b: Src,
    },
    Where {
        ty: Ty,
        dst: u32,
        pred: u32,
        a: Src,
        b: Src,
    },
    Convert {
        from: Ty,
        to: Ty,
        dst: u32,
        a: u32,
    },
    Store {
        ty: Ty,
        src: u32,
        acc: usize,
    },
    Reduce {
        ty: Ty,
        src: u32,
        red: usize,
    },
}

impl Ins {
    pub(crate) fn dst(&self) -> Option<(Ty, u32)> {
        match *self {
            Ins::Load { ty, dst, .. }
            | Ins::Splat { ty, dst, .. }
            | Ins::Unary { ty, dst, .. }
            | Ins::Binary { ty, dst, .. }
            | Ins::Where { ty, dst, .. } => Some((ty, dst)),
            Ins::Compare { dst, .. } => Some((Ty::B8, dst)),
            Ins::Convert { to, dst, .. } => Some((to, dst)),
            Ins::Store { .. } | Ins::Reduce { .. } => None,
        }
    }

    /// The registers the instruction reads.
    pub(crate) fn regs_mut(&mut self) -> Vec<&mut u32> {
        fn src(s: &mut Src) -> Option<&mut u32> {
            match s {
                Src::Reg(r) => Some(r),
                Src::Lit(_) => None,
            }
        }
        match self {
            Ins::Load { .. } | Ins::Splat { .. } => Vec::new(),
            Ins::Unary { a, .. } | Ins::Convert { a, .. } => vec![a],
            Ins::Store { src, .. } | Ins::Reduce { src, .. } => vec![src],
            Ins::Binary { a, b, .. } | Ins::Compare { a, b, .. } => {
                [src(a), src(b)].into_iter().flatten().collect()
            }
            Ins::Where { pred, a, b, .. } => {
                [Some(pred), src(a), src(b)].into_iter().flatten().collect()
            }
        }
    }

    fn reads(&self) -> Vec<u32> {
        self.clone().regs_mut().into_iter().map(|r| *r).collect()
    }
}

/// A strided read or write of a buffer over the group's iteration space.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Access {
    pub(crate) buf: BufId,
    pub(crate) layout: Layout,
}

/// A reduction into a contiguous output: element index = iteration index · `out_strides`
/// (0 on reduced dims). Accumulated in f64, written as `ty` at the end.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reduction {
    pub(crate) op: ReduceOp,
    pub(crate) ty: Ty,
    pub(crate) out: BufId,
    pub(crate) out_strides: Vec<i64>,
    pub(crate) out_numel: usize,
}

#[derive(Debug, Default)]
pub(crate) struct GroupBuilder {
    pub(crate) shape: Vec<usize>,
    pub(crate) ins: Vec<Ins>,
    pub(crate) types: Vec<Ty>,
    pub(crate) accesses: Vec<Access>,
    pub(crate) reductions: Vec<Reduction>,
    loads: HashMap<(BufId, Layout), u32>,
}

impl GroupBuilder {
    pub(crate) fn new(shape: Vec<usize>) -> GroupBuilder {
        GroupBuilder {
            shape,
            ..GroupBuilder::default()
        }
    }

    pub(crate) fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    pub(crate) fn fresh(&mut self, ty: Ty) -> u32 {
        self.types.push(ty);
        (self.types.len() - 1) as u32
    }

    pub(crate) fn ty(&self, ssa: u32) -> Ty {
        self.types[ssa as usize]
    }

    /// Reads `buf` through `layout` (strides over the group's shape); repeated reads share one.
    pub(crate) fn load(&mut self, buf: BufId, ty: Ty, layout: Layout) -> u32 {
        if let Some(&r) = self.loads.get(&(buf, layout.clone())) {
            return r;
        }
        let dst = self.fresh(ty);
        self.accesses.push(Access {
            buf,
            layout: layout.clone(),
        });
        let acc = self.accesses.len() - 1;
        self.ins.push(Ins::Load { ty, dst, acc });
        self.loads.insert((buf, layout), dst);
        dst
    }

    pub(crate) fn store(&mut self, src: u32, buf: BufId, layout: Layout) {
        let ty = self.ty(src);
        self.accesses.push(Access { buf, layout });
        let acc = self.accesses.len() - 1;
        self.ins.push(Ins::Store { ty, src, acc });
    }

    pub(crate) fn reduce(
        &mut self,
        src: u32,
        op: ReduceOp,
        out: BufId,
        strides: Vec<i64>,
        n: usize,
    ) {
        let ty = self.ty(src);
        self.reductions.push(Reduction {
            op,
            ty,
            out,
            out_strides: strides,
            out_numel: n,
        });
        let red = self.reductions.len() - 1;
        self.ins.push(Ins::Reduce { ty, src, red });
    }

    /// Lowers to a register program: dead instructions dropped, SSA values mapped to as few
    /// tile registers per type as their lifetimes allow, and the loop nest compacted.
    pub(crate) fn finish(self) -> GroupPlan {
        let mut live = vec![false; self.types.len()];
        let mut keep = vec![false; self.ins.len()];
        for (i, ins) in self.ins.iter().enumerate().rev() {
            let needed = match ins.dst() {
                Some((_, d)) => live[d as usize],
                None => true,
            };
            if needed {
                keep[i] = true;
                for r in ins.reads() {
                    live[r as usize] = true;
                }
            }
        }
        let mut ins: Vec<Ins> = self
            .ins
            .into_iter()
            .zip(keep)
            .filter_map(|(ins, k)| k.then_some(ins))
            .collect();

        let mut last_use = vec![usize::MAX; self.types.len()];
        for (i, ins) in ins.iter().enumerate() {
            for r in ins.reads() {
                last_use[r as usize] = i;
            }
        }
        let mut phys = vec![u32::MAX; self.types.len()];
        let mut free: HashMap<Ty, Vec<u32>> = HashMap::new();
        let mut count: HashMap<Ty, u32> = HashMap::new();
        for (i, ins) in ins.iter_mut().enumerate() {
            let reads = ins.reads();
            // The destination is taken before the sources are released, so it never aliases
            // a source of the same instruction (the kernels rely on that).
            if let Some((ty, d)) = ins.dst() {
                let reg = free.entry(ty).or_default().pop().unwrap_or_else(|| {
                    let c = count.entry(ty).or_default();
                    *c += 1;
                    *c - 1
                });
                phys[d as usize] = reg;
                if last_use[d as usize] == usize::MAX {
                    free.entry(ty).or_default().push(reg);
                }
            }
            for r in reads {
                if last_use[r as usize] == i {
                    let ty = self.types[r as usize];
                    let list = free.entry(ty).or_default();
                    if !list.contains(&phys[r as usize]) {
                        list.push(phys[r as usize]);
                    }
                }
            }
            for r in ins.regs_mut() {
                *r = phys[*r as usize];
            }
            if let Some(d) = match ins {
                Ins::Load { dst, .. }
                | Ins::Splat { dst, .. }
                | Ins::Unary { dst, .. }
                | Ins::Binary { dst, .. }
                | Ins::Compare { dst, .. }
                | Ins::Where { dst, .. }
                | Ins::Convert { dst, .. } => Some(dst),
                Ins::Store { .. } | Ins::Reduce { .. } => None,
            } {
                *d = phys[*d as usize];
            }
        }

        let mut strides: Vec<Vec<i64>> = self
            .accesses
            .iter()
            .map(|a| a.layout.strides.clone())
            .collect();
        strides.extend(self.reductions.iter().map(|r| r.out_strides.clone()));
        let numel = self.shape.iter().product();
        let nest = Nest {
            shape: self.shape,
            strides,
        }
        .compact();
        let n_acc = self.accesses.len();
        // Rows of different leading indices write different outputs unless a reduction folds
        // the leading dim, so only then must the group run on one thread.
        let parallel = self
            .reductions
            .iter()
            .enumerate()
            .all(|(k, _)| nest.strides[n_acc + k][0] != 0 || nest.shape[0] == 1);
        GroupPlan {
            numel,
            shape: nest.shape,
            access_strides: nest.strides[..n_acc].to_vec(),
            offsets: self.accesses.iter().map(|a| a.layout.offset).collect(),
            bufs: self.accesses.iter().map(|a| a.buf).collect(),
            red_strides: nest.strides[n_acc..].to_vec(),
            reductions: self.reductions,
            ins,
            regs: [Ty::F32, Ty::F64, Ty::B8, Ty::I64]
                .map(|t| count.get(&t).copied().unwrap_or(0) as usize),
            parallel,
            chain: std::sync::OnceLock::new(),
        }
    }
}

/// A lowered group, ready to run: see `exec.rs`.
#[derive(Debug, Clone)]
pub(crate) struct GroupPlan {
    pub(crate) numel: usize,
    /// Compacted iteration shape (never empty).
    pub(crate) shape: Vec<usize>,
    pub(crate) access_strides: Vec<Vec<i64>>,
    pub(crate) offsets: Vec<i64>,
    pub(crate) bufs: Vec<BufId>,
    pub(crate) red_strides: Vec<Vec<i64>>,
    pub(crate) reductions: Vec<Reduction>,
    pub(crate) ins: Vec<Ins>,
    /// Register count per type: f32, f64, b8, i64.
    pub(crate) regs: [usize; 4],
    pub(crate) parallel: bool,
    /// How the group runs in vector registers, if it does (`chain::chain_of`), found on its
    /// first run and kept: finding it allocates, and GELU matching made a cached call of a
    /// ten-op chain take 1.39 us instead of 0.58.
    pub(crate) chain: std::sync::OnceLock<Option<crate::chain::Chain>>,
}
