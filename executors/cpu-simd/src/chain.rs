//! The register-resident path for a group that is one f32 chain: a contiguous load, then
//! ops each reading the previous value (and literals, or another access loaded straight from
//! memory: a bias row, a second tensor), with contiguous stores of any of those values. The
//! tile path writes every op's result to a tile register and reads it back for the next op,
//! and copies each input tile into a register first; here each block of 64 elements goes
//! through all ops in vector registers, read straight from the sources and written straight
//! into the outputs, so the loads of the next block overlap the arithmetic of this one.
//!
//! The loop is compiled for AVX-512 (16 lanes) and AVX2+FMA (8 lanes), picked by
//! `exec::isa_level`; every step rounds exactly as the tile path's kernel for it does (see
//! `simd.rs`, `vmath.rs`), so which path runs a group never changes its result.

use crate::decode::{Lit, Ty};
use crate::exec::Ctx;
use crate::group::{GroupPlan, Ins, Src};
use crate::ops::{BinaryOp, Real, UnaryOp};

/// The binary ops the chain runs on vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

impl Arith {
    fn of(op: BinaryOp) -> Option<Arith> {
        match op {
            BinaryOp::Add => Some(Arith::Add),
            BinaryOp::Sub => Some(Arith::Sub),
            BinaryOp::Mul => Some(Arith::Mul),
            BinaryOp::Div => Some(Arith::Div),
            _ => None,
        }
    }
}

/// One step of a chain, applied to the running value `x`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Step {
    /// `x op c`, or `c op x` when `first`, in f32 (decode rounds float literals to the op's
    /// type, so `c` is the literal).
    Lit {
        op: Arith,
        c: f32,
        first: bool,
    },
    /// `x op x`.
    Same(Arith),
    /// `x op y` (`y op x` when `first`), `y` read from access `acc`: contiguous, or one value
    /// per row when `splat` (its stride along the tiled dim is 0).
    Load {
        op: Arith,
        acc: usize,
        splat: bool,
        first: bool,
    },
    Neg,
    Abs,
    Sqrt,
    Reciprocal,
    Tanh,
    /// Stores `x` into access `acc` (contiguous).
    Store(usize),
}

/// A chain: the access it loads and its steps.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chain {
    pub(crate) load: usize,
    pub(crate) steps: Vec<Step>,
}

fn lit_f32(l: Lit) -> Option<f32> {
    match l {
        Lit::F(v) => <f32 as Real>::exact(v).then_some(v as f32),
        Lit::I(v) => Some(v as f64 as f32),
        Lit::B(v) => Some(f32::from(u8::from(v))),
    }
}

/// The step for `x op lit` (`lit op x` when `first`).
fn lit_step(op: BinaryOp, l: Lit, first: bool) -> Option<Step> {
    Some(Step::Lit {
        op: Arith::of(op)?,
        c: lit_f32(l)?,
        first,
    })
}

fn unary_step(op: UnaryOp) -> Option<Step> {
    Some(match op {
        UnaryOp::Neg => Step::Neg,
        UnaryOp::Abs => Step::Abs,
        UnaryOp::Sqrt => Step::Sqrt,
        UnaryOp::Reciprocal => Step::Reciprocal,
        UnaryOp::Tanh => Step::Tanh,
        // The others have no vector form here and keep the tile path.
        _ => return None,
    })
}

/// Builds a chain while walking a group's instructions.
struct Builder<'a> {
    last: &'a [i64],
    /// Registers holding a loaded access: (register, access).
    loaded: Vec<(u32, usize)>,
    /// The access the chain starts from and the register with the running value.
    start: Option<(usize, u32)>,
    steps: Vec<Step>,
    /// Where each register's value was made: a store of it is placed right after that step
    /// (the tile path stores at the end, but a chain holds only its running value).
    made: Vec<(u32, usize)>,
}

impl Builder<'_> {
    /// Whether `r` is the running value, starting the chain from it when none has started and
    /// it holds a contiguous load.
    fn is_cur(&mut self, r: u32) -> bool {
        match self.start {
            Some((_, cur)) => cur == r,
            None => match self.loaded.iter().find(|l| l.0 == r) {
                Some(&(_, acc)) if self.last[acc] == 1 => {
                    self.start = Some((acc, r));
                    self.made.push((r, 0));
                    true
                }
                _ => false,
            },
        }
    }

    /// A register is written: what it held before is gone.
    fn written(&mut self, dst: u32, step: Step) {
        self.steps.push(step);
        self.loaded.retain(|l| l.0 != dst);
        self.made.retain(|m| m.0 != dst);
        self.made.push((dst, self.steps.len()));
        if let Some((acc, _)) = self.start {
            self.start = Some((acc, dst));
        }
    }

    fn ins(&mut self, i: &Ins) -> Option<()> {
        match *i {
            Ins::Load {
                ty: Ty::F32,
                dst,
                acc,
            } if matches!(self.last[acc], 0 | 1) => {
                self.loaded.retain(|l| l.0 != dst);
                self.made.retain(|m| m.0 != dst);
                self.loaded.push((dst, acc));
                if let Some((a, cur)) = self.start {
                    if cur == dst {
                        // The running value's register is reused: the chain cannot go on.
                        self.start = Some((a, u32::MAX));
                    }
                }
            }
            Ins::Store {
                ty: Ty::F32,
                src,
                acc,
            } if self.last[acc] == 1 => {
                let &(_, at) = self.made.iter().find(|&&(r, _)| r == src)?;
                self.steps.insert(at, Step::Store(acc));
                for m in self.made.iter_mut().filter(|m| m.1 >= at) {
                    m.1 += 1;
                }
            }
            Ins::Unary {
                ty: Ty::F32,
                op,
                dst,
                a,
            } if self.is_cur(a) => self.written(dst, unary_step(op)?),
            Ins::Binary {
                ty: Ty::F32,
                op,
                dst,
                a,
                b,
            } => {
                let step = match (a, b) {
                    (Src::Reg(x), Src::Reg(y)) if x == y && self.is_cur(x) => {
                        Step::Same(Arith::of(op)?)
                    }
                    (Src::Reg(x), Src::Lit(l)) if self.is_cur(x) => lit_step(op, l, false)?,
                    (Src::Lit(l), Src::Reg(y)) if self.is_cur(y) => lit_step(op, l, true)?,
                    (Src::Reg(x), Src::Reg(y)) => {
                        let (other, first) = if self.is_cur(x) {
                            (y, false)
                        } else if self.is_cur(y) {
                            (x, true)
                        } else {
                            return None;
                        };
                        let &(_, acc) = self.loaded.iter().find(|l| l.0 == other)?;
                        Step::Load {
                            op: Arith::of(op)?,
                            acc,
                            splat: self.last[acc] == 0,
                            first,
                        }
                    }
                    _ => return None,
                };
                self.written(dst, step);
            }
            _ => return None,
        }
        Some(())
    }
}

/// The chain a group's program is, if it is one whose every step has a vector form; `last` is
/// each access's stride along the tiled dim.
pub(crate) fn chain_of(plan: &GroupPlan, last: &[i64]) -> Option<Chain> {
    if !plan.reductions.is_empty() {
        return None;
    }
    let mut b = Builder {
        last,
        loaded: Vec::new(),
        start: None,
        steps: Vec::new(),
        made: Vec::new(),
    };
    for i in &plan.ins {
        b.ins(i)?;
    }
    let (load, _) = b.start?;
    b.steps
        .iter()
        .any(|s| matches!(s, Step::Store(_)))
        .then_some(Chain {
            load,
            steps: b.steps,
        })
}

/// How far ahead (bytes) a large group's sources are prefetched.
#[cfg(target_arch = "x86_64")]
const PREFETCH: usize = 4096;

/// Runs the chain over `len` elements starting at the accesses' offsets `offs`, on the widest
/// vectors the dispatched level has.
///
/// # Safety
/// The CPU has AVX2 and FMA (`exec::isa_level() >= 1`); the offsets and `len` address
/// elements of the group's buffers (as for the tile path).
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn run(ctx: &Ctx<'_>, chain: &Chain, offs: &[i64], len: usize) {
    // SAFETY: forwarded; the level says the CPU has the features.
    unsafe {
        if crate::exec::isa_level() >= 2 {
            run_avx512(ctx, chain, offs, len)
        } else {
            run_avx2(ctx, chain, offs, len)
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run_avx512(ctx: &Ctx<'_>, chain: &Chain, offs: &[i64], len: usize) {
    // SAFETY: forwarded.
    unsafe { run_v::<crate::simd::V512, 4>(ctx, chain, offs, len) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2(ctx: &Ctx<'_>, chain: &Chain, offs: &[i64], len: usize) {
    // SAFETY: forwarded.
    unsafe { run_v::<crate::simd::V256, 8>(ctx, chain, offs, len) }
}

/// Elements per block: 64 (4 AVX-512 or 8 AVX2 registers), enough independent work per step
/// to hide its latency.
#[cfg(target_arch = "x86_64")]
const BLOCK: usize = 64;

/// Where a block's operands come from and its results go.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum At {
    /// A whole block at element `o` of the accesses, stores non-temporal when `stream`.
    Full { o: usize, stream: bool },
    /// The last `n` (< BLOCK) elements, from element `o`, through padded buffers.
    Tail { o: usize, n: usize },
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn run_v<V: crate::simd::Vf32, const K: usize>(
    ctx: &Ctx<'_>,
    chain: &Chain,
    offs: &[i64],
    len: usize,
) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    debug_assert_eq!(V::LANES * K, BLOCK);
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let ptr = |acc: usize| (ctx.base[acc] as *mut f32).offset(offs[acc] as isize);
        let src = ptr(chain.load) as *const f32;
        // Non-temporal stores need aligned destinations; they go around the caches for
        // groups far larger than them (`exec::STREAM_MIN`).
        let stream = ctx.stream
            && chain.steps.iter().all(|s| match *s {
                Step::Store(acc) => (ptr(acc) as usize).is_multiple_of(V::LANES * 4),
                _ => true,
            });
        let blocks = len / BLOCK;
        for b in 0..blocks {
            let o = b * BLOCK;
            if ctx.stream {
                // A prefetch never faults, so asking past the buffer's end is harmless.
                let ahead = (src.add(o) as *const i8).wrapping_add(PREFETCH);
                for l in 0..4 {
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * l));
                }
            }
            let mut x = [V::splat(0.0); K];
            for (k, v) in x.iter_mut().enumerate() {
                *v = V::load(src.add(o + V::LANES * k));
            }
            steps::<V, K>(ctx, chain, offs, &mut x, At::Full { o, stream });
        }
        let o = blocks * BLOCK;
        let n = len - o;
        if n > 0 {
            let mut buf = [0f32; BLOCK];
            std::ptr::copy_nonoverlapping(src.add(o), buf.as_mut_ptr(), n);
            let mut x = [V::splat(0.0); K];
            for (k, v) in x.iter_mut().enumerate() {
                *v = V::load(buf.as_ptr().add(V::LANES * k));
            }
            steps::<V, K>(ctx, chain, offs, &mut x, At::Tail { o, n });
        }
    }
}

/// Runs every step on one block `x`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn steps<V: crate::simd::Vf32, const K: usize>(
    ctx: &Ctx<'_>,
    chain: &Chain,
    offs: &[i64],
    x: &mut [V; K],
    at: At,
) {
    use crate::simd::arith;
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY (whole fn): forwarded from `run_v`: every pointer is inside its buffer.
    unsafe {
        let ptr = |acc: usize| (ctx.base[acc] as *mut f32).offset(offs[acc] as isize);
        for s in &chain.steps {
            match *s {
                Step::Lit { op, c, first } => {
                    let c = V::splat(c);
                    for v in x.iter_mut() {
                        *v = if first {
                            arith(op, c, *v)
                        } else {
                            arith(op, *v, c)
                        };
                    }
                }
                Step::Same(op) => {
                    for v in x.iter_mut() {
                        *v = arith(op, *v, *v);
                    }
                }
                Step::Load {
                    op,
                    acc,
                    splat,
                    first,
                } => {
                    let p = ptr(acc) as *const f32;
                    let mut y = [V::splat(0.0); K];
                    if splat {
                        y = [V::splat(*p); K];
                    } else {
                        match at {
                            At::Full { o, .. } => {
                                if ctx.stream {
                                    let ahead = (p.add(o) as *const i8).wrapping_add(PREFETCH);
                                    for l in 0..4 {
                                        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * l));
                                    }
                                }
                                for (k, v) in y.iter_mut().enumerate() {
                                    *v = V::load(p.add(o + V::LANES * k));
                                }
                            }
                            At::Tail { o, n } => {
                                let mut buf = [0f32; BLOCK];
                                std::ptr::copy_nonoverlapping(p.add(o), buf.as_mut_ptr(), n);
                                for (k, v) in y.iter_mut().enumerate() {
                                    *v = V::load(buf.as_ptr().add(V::LANES * k));
                                }
                            }
                        }
                    }
                    for (v, y) in x.iter_mut().zip(y) {
                        *v = if first {
                            arith(op, y, *v)
                        } else {
                            arith(op, *v, y)
                        };
                    }
                }
                Step::Neg => {
                    for v in x.iter_mut() {
                        *v = V::neg(*v);
                    }
                }
                Step::Abs => {
                    for v in x.iter_mut() {
                        *v = V::abs(*v);
                    }
                }
                Step::Sqrt => {
                    for v in x.iter_mut() {
                        *v = V::sqrt(*v);
                    }
                }
                Step::Reciprocal => {
                    let one = V::splat(1.0);
                    for v in x.iter_mut() {
                        *v = V::div(one, *v);
                    }
                }
                Step::Tanh => {
                    for v in x.iter_mut() {
                        *v = crate::vmath::tanh(*v);
                    }
                }
                Step::Store(acc) => {
                    let p = ptr(acc);
                    match at {
                        At::Full { o, stream: true } => {
                            for (k, v) in x.iter().enumerate() {
                                V::stream(p.add(o + V::LANES * k), *v);
                            }
                        }
                        At::Full { o, stream: false } => {
                            for (k, v) in x.iter().enumerate() {
                                V::store(p.add(o + V::LANES * k), *v);
                            }
                        }
                        At::Tail { o, n } => {
                            let mut buf = [0f32; BLOCK];
                            for (k, v) in x.iter().enumerate() {
                                V::store(buf.as_mut_ptr().add(V::LANES * k), *v);
                            }
                            std::ptr::copy_nonoverlapping(buf.as_ptr(), p.add(o), n);
                        }
                    }
                }
            }
        }
    }
}
