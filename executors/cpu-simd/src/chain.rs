//! The register-resident path for a group that is one f32 chain: a contiguous load, then
//! ops each reading the previous value (and literals, or another access loaded straight from
//! memory: a bias row, a second tensor), with contiguous stores of any of those values. The
//! tile path writes every op's result to a tile register and reads it back for the next op,
//! and copies each input tile into a register first; here each block of 128 elements (8
//! AVX-512 vectors; see `K512`) goes through all ops in vector registers, read straight from
//! the sources and written straight into the outputs, so the loads of the next block overlap
//! the arithmetic of this one, and the block's independent vectors overlap each other's
//! latency (a chain of tanh is a chain of dependent operations).
//!
//! A group whose values do not form one running chain (GELU reads its input twice: `y *
//! (1 + erf(y / sqrt 2))`) but whose instructions all have vector forms runs as a *program*
//! instead: the group's own instructions, interpreted per block on a small file of vector
//! registers (`MAX_REGS` blocks on the stack, in L1), so a long step such as erf still runs
//! at full width with no tile of memory between its operations.
//!
//! The loop is compiled for AVX-512 (16 lanes) and AVX2+FMA (8 lanes), picked by
//! `exec::isa_level`; every step rounds exactly as the tile path's kernel for it does (see
//! `simd.rs`, `vmath.rs`), so which path runs a group never changes its result.

use crate::chain_fuse::{fuse_gelu, Item};
use crate::decode::{Lit, Ty};
use crate::exec::Ctx;
use crate::group::{GroupPlan, Ins, Src};
use crate::ops::{BinaryOp, Real, ReduceOp, UnaryOp};

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
    Unary(Un),
    /// A GELU found by `chain_fuse` (its operations, in its order, on `x`).
    Gelu(Gelu),
    /// Stores `x` into access `acc` (contiguous).
    Store(usize),
}

/// A GELU as `chain_fuse` found it, with the literals the group holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Gelu {
    /// `(x * c0) * ((tanh((x + ((x * x) * x) * c1) * c2)) + c3)`.
    Tanh([f32; 4]),
    /// `(x * (erf(x / c0) + c1)) * c2`.
    Erf([f32; 3]),
}

/// The unary ops with a vector form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Un {
    Neg,
    Abs,
    Sqrt,
    Reciprocal,
    Tanh,
    Exp,
    Erf,
}

/// An operand of a program instruction: a register or an f32 literal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Val {
    Reg(u8),
    Lit(f32),
}

/// One instruction of a program (registers index the program's register file).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Vi {
    /// Access `acc` into `dst`: contiguous, or one value per row when `splat`.
    Load {
        dst: u8,
        acc: usize,
        splat: bool,
    },
    Unary {
        op: Un,
        dst: u8,
        a: u8,
    },
    Binary {
        op: Arith,
        dst: u8,
        a: Val,
        b: Val,
    },
    /// `src` into access `acc` (contiguous).
    Store {
        src: u8,
        acc: usize,
    },
    /// `src` summed into reduction `red`'s f64 accumulators: one per element of the block (a
    /// fold over an outer dim: a bias or a layer norm's weight gradient), or when `row`, one
    /// for the whole row (a layer norm's sum along it; only compiled kernels run those).
    Sum {
        src: u8,
        red: usize,
        row: bool,
    },
}

/// The most f32 registers a program may use: 8 blocks of up to `MAX_BLOCK` floats (4 KB of
/// stack).
const MAX_REGS: usize = 8;

/// How a group runs in vector registers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Chain {
    /// One running value: the access it loads and its steps.
    Line { load: usize, steps: Vec<Step> },
    /// The group's instructions on a register file.
    Prog(Prog),
    /// A program compiled ahead of time (`chain_aot.rs`).
    Aot(crate::chain_aot::Aot),
}

impl Chain {
    /// A single running value through steps that load nothing and call no transcendental
    /// function. Such a chain is compiled on its own (`run_v`'s `LIGHT`): with the load and
    /// the transcendental arms in its loop, AVX2's 16 registers could not hold the block
    /// across steps and it went through the stack at every step. `chain8_16m` on AVX2 went
    /// from 2.45-2.50 to 2.37-2.43 ms (AMD EPYC Zen 5, `THUNDER_CPU_SIMD_ISA=avx2`); the
    /// build before those arms existed ran 2.17-2.42 ms there.
    #[cfg(target_arch = "x86_64")]
    fn light(&self) -> bool {
        match self {
            Chain::Line { steps, .. } => steps.iter().all(|s| match s {
                Step::Unary(op) => !matches!(op, Un::Tanh | Un::Exp | Un::Erf),
                Step::Load { .. } | Step::Gelu(_) => false,
                Step::Lit { .. } | Step::Same(_) | Step::Store(_) => true,
            }),
            Chain::Prog(_) | Chain::Aot(_) => false,
        }
    }

    /// Whether the chain has a GELU step. Only such chains are compiled with the GELU arm
    /// (`run_v`'s `GELU`): in every loop it was in, `chain8_16m` ran 2.5% slower and
    /// `tanh4_16m` 1% (AVX-512, Zen 5).
    #[cfg(target_arch = "x86_64")]
    fn gelu(&self) -> bool {
        matches!(self, Chain::Line { steps, .. } if steps.iter().any(|s| matches!(s, Step::Gelu(_))))
    }
}

pub(crate) fn lit_f32(l: Lit) -> Option<f32> {
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

fn un(op: UnaryOp) -> Option<Un> {
    Some(match op {
        UnaryOp::Neg => Un::Neg,
        UnaryOp::Abs => Un::Abs,
        UnaryOp::Sqrt => Un::Sqrt,
        UnaryOp::Reciprocal => Un::Reciprocal,
        UnaryOp::Tanh => Un::Tanh,
        UnaryOp::Exp => Un::Exp,
        UnaryOp::Erf => Un::Erf,
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

    fn item(&mut self, it: &Item) -> Option<()> {
        match it {
            Item::Ins(i) => self.ins(i),
            &Item::Gelu { dst, a, form } => {
                self.is_cur(a).then(|| self.written(dst, Step::Gelu(form)))
            }
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
            } if self.is_cur(a) => self.written(dst, Step::Unary(un(op)?)),
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

/// How a group runs in vector registers, if every instruction has a vector form: as one
/// chain where it is one, else as a program; `last` is each access's stride along the tiled
/// dim.
///
/// A group with reductions runs as a program when each is a sum into contiguous accumulators
/// (the tile path folds those element by element, so the program gives the same bits). A sum
/// along the row (a layer norm's) needs a compiled kernel (`chain_aot.rs`), which adds in
/// `kernels::reduce_tile`'s order; other reductions (a softmax's max) keep the tile path.
pub(crate) fn chain_of(plan: &GroupPlan, last: &[i64]) -> Option<Chain> {
    if plan.reductions.is_empty() {
        return chain_of_ins(&plan.ins, last);
    }
    let sums: Vec<Option<bool>> = plan
        .reductions
        .iter()
        .zip(&plan.red_strides)
        .map(|(r, s)| match (r.op, s.last()) {
            (ReduceOp::Sum, Some(&1)) => Some(false),
            (ReduceOp::Sum, Some(&0)) => Some(true),
            _ => None,
        })
        .collect();
    prog_of(&plan.ins, last, &sums)
}

/// [`chain_of`] for a group without reductions, from its instructions.
pub(crate) fn chain_of_ins(ins: &[Ins], last: &[i64]) -> Option<Chain> {
    // A GELU without a bias before it is a chain already (its input is loaded again where it
    // is read again); fused, it is the same bits without the second load.
    let plain = || line_of(ins.iter().map(|i| Item::Ins(i.clone())), last);
    fuse_gelu(ins)
        .and_then(|items| line_of(items.into_iter(), last))
        .or_else(plain)
        .or_else(|| prog_of(ins, last, &[]))
}

fn line_of(items: impl Iterator<Item = Item>, last: &[i64]) -> Option<Chain> {
    let mut b = Builder {
        last,
        loaded: Vec::new(),
        start: None,
        steps: Vec::new(),
        made: Vec::new(),
    };
    for i in items {
        b.item(&i)?;
    }
    let (load, _) = b.start?;
    b.steps
        .iter()
        .any(|s| matches!(s, Step::Store(_)))
        .then_some(Chain::Line {
            load,
            steps: b.steps,
        })
}

/// The group's instructions as a program: f32 only, contiguous or per-row loads, contiguous
/// stores, ops with vector forms, f32 literals, registers below `MAX_REGS` (they are the
/// group's own register numbers, already allocated so that a destination never overwrites a
/// value still to be read), and f32 sums into the reductions `sums` marks (`Some(row)`: along
/// the row or over it).
fn prog_of(ins: &[Ins], last: &[i64], sums: &[Option<bool>]) -> Option<Chain> {
    let reg = |r: u32| (r < MAX_REGS as u32).then_some(r as u8);
    let val = |s: &Src| match *s {
        Src::Reg(r) => reg(r).map(Val::Reg),
        Src::Lit(l) => lit_f32(l).map(Val::Lit),
    };
    let mut prog = Vec::with_capacity(ins.len());
    for i in ins {
        prog.push(match i {
            Ins::Load {
                ty: Ty::F32,
                dst,
                acc,
            } if matches!(last[*acc], 0 | 1) => Vi::Load {
                dst: reg(*dst)?,
                acc: *acc,
                splat: last[*acc] == 0,
            },
            Ins::Store {
                ty: Ty::F32,
                src,
                acc,
            } if last[*acc] == 1 => Vi::Store {
                src: reg(*src)?,
                acc: *acc,
            },
            Ins::Reduce {
                ty: Ty::F32,
                src,
                red,
            } => Vi::Sum {
                src: reg(*src)?,
                red: *red,
                row: (*sums.get(*red)?)?,
            },
            Ins::Unary {
                ty: Ty::F32,
                op,
                dst,
                a,
            } => Vi::Unary {
                op: un(*op)?,
                dst: reg(*dst)?,
                a: reg(*a)?,
            },
            Ins::Binary {
                ty: Ty::F32,
                op,
                dst,
                a,
                b,
            } => Vi::Binary {
                op: Arith::of(*op)?,
                dst: reg(*dst)?,
                a: val(a)?,
                b: val(b)?,
            },
            _ => return None,
        });
    }
    if !prog.iter().any(|i| matches!(i, Vi::Store { .. })) {
        return None;
    }
    match crate::chain_aot::find(&prog) {
        Some(aot) => Some(Chain::Aot(aot)),
        None => Prog::new(prog).map(Chain::Prog),
    }
}

/// A program the interpreter runs. Its sums are all over the rows: a sum along the row must
/// add in `kernels::reduce_tile`'s order, which only compiled kernels do, so [`Prog::new`]
/// refuses programs with one and such a group keeps the tile path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Prog(Vec<Vi>);

impl Prog {
    fn new(prog: Vec<Vi>) -> Option<Prog> {
        let along_row = prog.iter().any(|i| matches!(i, Vi::Sum { row: true, .. }));
        (!along_row).then_some(Prog(prog))
    }
}

impl std::ops::Deref for Prog {
    type Target = [Vi];
    fn deref(&self) -> &[Vi] {
        &self.0
    }
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
pub(crate) unsafe fn run(ctx: &Ctx<'_>, chain: &Chain, offs: &Offs<'_>, len: usize) {
    // SAFETY: forwarded; the level says the CPU has the features.
    unsafe {
        match (crate::exec::isa_level() >= 2, chain.gelu()) {
            (true, true) => run_avx512_gelu(ctx, chain, offs, len),
            (true, false) => run_avx512(ctx, chain, offs, len),
            (false, true) => run_avx2_gelu(ctx, chain, offs, len),
            (false, false) => run_avx2(ctx, chain, offs, len),
        }
    }
}

/// Where a run starts: each access's element offset, and each reduction's accumulator offset.
#[derive(Clone, Copy)]
pub(crate) struct Offs<'a> {
    pub(crate) acc: &'a [i64],
    pub(crate) red: &'a [i64],
}

// The loops are sensitive to what else is compiled into their function: with the GELU form
// inlined beside the others, the light chain on AVX2 (`chain8_16m`) ran 15% slower, and with
// the AVX2 light and plain forms in functions of their own, `tanh4_16m` on AVX2 ran 13%
// slower. So the GELU forms have functions of their own and the others keep the ones they had.

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run_avx512(ctx: &Ctx<'_>, chain: &Chain, offs: &Offs<'_>, len: usize) {
    // SAFETY: forwarded.
    unsafe { run_v::<crate::simd::V512, K512, 4, KA512, false, false>(ctx, chain, offs, len) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run_avx512_gelu(ctx: &Ctx<'_>, chain: &Chain, offs: &Offs<'_>, len: usize) {
    // SAFETY: forwarded.
    unsafe { run_v::<crate::simd::V512, K512, 4, KA512, false, true>(ctx, chain, offs, len) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2(ctx: &Ctx<'_>, chain: &Chain, offs: &Offs<'_>, len: usize) {
    // SAFETY: forwarded.
    unsafe {
        if chain.light() {
            run_v::<crate::simd::V256, K256, 8, KA256, true, false>(ctx, chain, offs, len)
        } else {
            run_v::<crate::simd::V256, K256, 8, KA256, false, false>(ctx, chain, offs, len)
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2_gelu(ctx: &Ctx<'_>, chain: &Chain, offs: &Offs<'_>, len: usize) {
    // SAFETY: forwarded.
    unsafe { run_v::<crate::simd::V256, K256, 8, KA256, false, true>(ctx, chain, offs, len) }
}

/// Vectors per block on AVX-512 and on AVX2: independent work enough for each step to hide
/// the latency of the one before (a tanh is about 15 dependent operations of 4 cycles, at 2
/// a cycle), while the block, the step's temporaries and its constants stay in the registers.
/// On a 2-core AVX-512 Xeon VM, `thunder bench`'s `tanh4_16m` took 9.6 ms with 4 vectors, 7.9
/// with 8 and 11.6 with 16 (spilled); on its AVX2 path, 12 ms with 8 vectors and 24 with 16
/// (AVX2 has 16 registers). A row's remainder runs in blocks of [`SMALL`] elements, then one padded
/// tail.
#[cfg(target_arch = "x86_64")]
const K512: usize = 8;
#[cfg(target_arch = "x86_64")]
const K256: usize = 8;
#[cfg(target_arch = "x86_64")]
const KA512: usize = 2;
#[cfg(target_arch = "x86_64")]
const KA256: usize = 4;

/// Elements per block of a row's remainder (4 AVX-512 or 8 AVX2 vectors).
#[cfg(target_arch = "x86_64")]
const SMALL: usize = 64;

/// The most elements in a block, for the tail's padded buffers.
#[cfg(target_arch = "x86_64")]
pub(crate) const MAX_BLOCK: usize = 128;

/// Where a block's operands come from and its results go.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) enum At {
    /// A whole block at element `o` of the accesses, stores non-temporal when `stream`.
    Full { o: usize, stream: bool },
    /// The last `n` (< the block's size) elements, from element `o`, through padded buffers.
    Tail { o: usize, n: usize },
}

/// Runs the chain (`K` vectors a block) or the program (`K` vectors a register) over `len`
/// elements: blocks of `K` vectors, then of `KS` (= `SMALL` elements), then a padded tail.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn run_v<
    V: crate::simd::Vf32,
    const K: usize,
    const KS: usize,
    const KA: usize,
    const LIGHT: bool,
    const GELU: bool,
>(
    ctx: &Ctx<'_>,
    chain: &Chain,
    all_offs: &Offs<'_>,
    len: usize,
) {
    debug_assert!(V::LANES * K <= MAX_BLOCK && V::LANES * KS == SMALL);
    let offs = all_offs.acc;
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let ptr = |acc: usize| (ctx.base[acc] as *mut f32).offset(offs[acc] as isize);
        let big = len / (V::LANES * K) * (V::LANES * K);
        let small = big + (len - big) / SMALL * SMALL;
        match chain {
            Chain::Line { load, steps } => {
                // Non-temporal stores need aligned destinations; they go around the caches
                // for groups far larger than them (`exec::STREAM_MIN`).
                let stream = ctx.stream
                    && steps.iter().all(|s| match *s {
                        Step::Store(acc) => (ptr(acc) as usize).is_multiple_of(V::LANES * 4),
                        _ => true,
                    });
                let src = ptr(*load) as *const f32;
                line_blocks::<V, K, LIGHT, GELU>(ctx, steps, offs, src, (0, big), stream);
                line_blocks::<V, KS, LIGHT, GELU>(ctx, steps, offs, src, (big, small), stream);
                if len > small {
                    let (o, n) = (small, len - small);
                    let mut x: [V; KS] = load_block(src, At::Tail { o, n }, false);
                    run_steps::<V, KS, LIGHT, GELU>(ctx, steps, offs, &mut x, At::Tail { o, n });
                }
            }
            Chain::Aot(aot) => crate::chain_aot::run::<V, KA>(ctx, aot, all_offs, len),
            Chain::Prog(prog) => {
                let stream = ctx.stream
                    && prog.iter().all(|i| match *i {
                        Vi::Store { acc, .. } => (ptr(acc) as usize).is_multiple_of(V::LANES * 4),
                        _ => true,
                    });
                prog_blocks::<V, K>(ctx, prog, all_offs, (0, big), stream);
                prog_blocks::<V, KS>(ctx, prog, all_offs, (big, small), stream);
                if len > small {
                    let mut regs = [[V::splat(0.0); KS]; MAX_REGS];
                    let at = At::Tail {
                        o: small,
                        n: len - small,
                    };
                    prog_block::<V, KS>(ctx, prog, all_offs, &mut regs, at);
                }
            }
        }
    }
}

/// Prefetches the block of `K` vectors at element `o` of `p`, `PREFETCH` bytes ahead.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn prefetch_block<V: crate::simd::Vf32, const K: usize>(p: *const f32, o: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // A prefetch never faults, so asking past the buffer's end is harmless.
    let ahead = (p.wrapping_add(o) as *const i8).wrapping_add(PREFETCH);
    for l in 0..(V::LANES * K * 4).div_ceil(64) {
        // SAFETY: a prefetch reads nothing.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * l)) };
    }
}

/// The chain's steps over the whole blocks of `K` vectors in elements `range`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn line_blocks<V: crate::simd::Vf32, const K: usize, const LIGHT: bool, const GELU: bool>(
    ctx: &Ctx<'_>,
    steps: &[Step],
    offs: &[i64],
    src: *const f32,
    range: (usize, usize),
    stream: bool,
) {
    // SAFETY (whole fn): forwarded from `run_v`: the blocks are inside the buffers.
    unsafe {
        for o in (range.0..range.1).step_by(V::LANES * K) {
            let mut x: [V; K] = load_block(src, At::Full { o, stream }, ctx.stream);
            run_steps::<V, K, LIGHT, GELU>(ctx, steps, offs, &mut x, At::Full { o, stream });
        }
    }
}

/// A unary op on one vector.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn unary<V: crate::simd::Vf32>(op: Un, v: V) -> V {
    use crate::vmath;
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        match op {
            Un::Tanh => vmath::tanh(v),
            Un::Exp => vmath::exp(v),
            Un::Erf => vmath::erf(v),
            Un::Neg | Un::Abs | Un::Sqrt | Un::Reciprocal => simple_unary(op, v),
        }
    }
}

/// A fused GELU on a block: `chain_fuse`'s patterns, operation for operation. Each operation
/// runs over the block's vectors before the next, as separate steps would, so that the
/// vectors' independent work hides each one's latency (one vector at a time through the
/// whole GELU left the erf form 10% slower than its unfused chain).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn gelu<V: crate::simd::Vf32, const K: usize>(g: Gelu, y: &[V; K]) -> [V; K] {
    use crate::vmath;
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let mut t = [V::splat(0.0); K];
        match g {
            Gelu::Tanh([half, cube, scale, one]) => {
                for (t, &y) in t.iter_mut().zip(y) {
                    let y3 = V::mul(V::mul(y, y), y);
                    *t = V::mul(V::add(y, V::mul(y3, V::splat(cube))), V::splat(scale));
                }
                for t in t.iter_mut() {
                    *t = vmath::tanh(*t);
                }
                for (t, &y) in t.iter_mut().zip(y) {
                    *t = V::mul(V::mul(y, V::splat(half)), V::add(*t, V::splat(one)));
                }
            }
            Gelu::Erf([root2, one, half]) => {
                for (t, &y) in t.iter_mut().zip(y) {
                    *t = V::div(y, V::splat(root2));
                }
                for t in t.iter_mut() {
                    *t = vmath::erf(*t);
                }
                for (t, &y) in t.iter_mut().zip(y) {
                    *t = V::mul(V::mul(y, V::add(*t, V::splat(one))), V::splat(half));
                }
            }
        }
        t
    }
}

/// The unary ops that are one or two instructions (what a light chain may hold).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn simple_unary<V: crate::simd::Vf32>(op: Un, v: V) -> V {
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        match op {
            Un::Neg => V::neg(v),
            Un::Abs => V::abs(v),
            Un::Sqrt => V::sqrt(v),
            Un::Reciprocal => V::div(V::splat(1.0), v),
            Un::Tanh | Un::Exp | Un::Erf => unreachable!("{op:?} is not a simple unary op"),
        }
    }
}

/// Loads a block of access `p` (contiguous) at `at`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn load_block<V: crate::simd::Vf32, const K: usize>(
    p: *const f32,
    at: At,
    prefetch: bool,
) -> [V; K] {
    // SAFETY (whole fn): forwarded from the caller: the block is inside the buffer.
    unsafe {
        let mut y = [V::splat(0.0); K];
        match at {
            At::Full { o, .. } => {
                if prefetch {
                    prefetch_block::<V, K>(p, o);
                }
                for (k, v) in y.iter_mut().enumerate() {
                    *v = V::load(p.add(o + V::LANES * k));
                }
            }
            At::Tail { o, n } => {
                let mut buf = [0f32; MAX_BLOCK];
                std::ptr::copy_nonoverlapping(p.add(o), buf.as_mut_ptr(), n);
                for (k, v) in y.iter_mut().enumerate() {
                    *v = V::load(buf.as_ptr().add(V::LANES * k));
                }
            }
        }
        y
    }
}

/// Stores a block into access `p` (contiguous) at `at`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn store_block<V: crate::simd::Vf32, const K: usize>(
    p: *mut f32,
    x: &[V; K],
    at: At,
) {
    // SAFETY (whole fn): forwarded from the caller: the block is inside the buffer, aligned
    // when streamed.
    unsafe {
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
                let mut buf = [0f32; MAX_BLOCK];
                for (k, v) in x.iter().enumerate() {
                    V::store(buf.as_mut_ptr().add(V::LANES * k), *v);
                }
                std::ptr::copy_nonoverlapping(buf.as_ptr(), p.add(o), n);
            }
        }
    }
}

/// Adds a block into contiguous f64 accumulators `p` at `at`, as `tile::reduce_into` does.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn sum_block<V: crate::simd::Vf32, const K: usize>(
    p: *mut f64,
    x: &[V; K],
    at: At,
) {
    // SAFETY (whole fn): forwarded from the caller: the block's accumulators are inside.
    unsafe {
        match at {
            At::Full { o, .. } => {
                for (k, v) in x.iter().enumerate() {
                    V::sum_into_f64(p.add(o + V::LANES * k), *v);
                }
            }
            At::Tail { o, n } => {
                let mut buf = [0f32; MAX_BLOCK];
                for (k, v) in x.iter().enumerate() {
                    V::store(buf.as_mut_ptr().add(V::LANES * k), *v);
                }
                for (j, &v) in buf[..n].iter().enumerate() {
                    *p.add(o + j) += f64::from(v);
                }
            }
        }
    }
}

/// A program over the whole blocks of `K` vectors in elements `range`, on a register file of
/// `MAX_REGS` blocks.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn prog_blocks<V: crate::simd::Vf32, const K: usize>(
    ctx: &Ctx<'_>,
    prog: &[Vi],
    offs: &Offs<'_>,
    range: (usize, usize),
    stream: bool,
) {
    // SAFETY (whole fn): forwarded from `run_v`: the blocks are inside the buffers.
    unsafe {
        let mut regs = [[V::splat(0.0); K]; MAX_REGS];
        for o in (range.0..range.1).step_by(V::LANES * K) {
            prog_block::<V, K>(ctx, prog, offs, &mut regs, At::Full { o, stream });
        }
    }
}

/// One block of a program. A function rather than a closure: a closure is compiled without
/// the caller's target features, and its vector operations would be calls.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn prog_block<V: crate::simd::Vf32, const K: usize>(
    ctx: &Ctx<'_>,
    prog: &[Vi],
    all_offs: &Offs<'_>,
    regs: &mut [[V; K]; MAX_REGS],
    at: At,
) {
    use crate::simd::arith_block;
    let offs = all_offs.acc;
    // SAFETY (whole fn): forwarded from `run_v`; each reduction's accumulators hold an
    // element for each element of the run.
    unsafe {
        for i in prog {
            match *i {
                Vi::Load { dst, acc, splat } => {
                    let p = (ctx.base[acc] as *const f32).offset(offs[acc] as isize);
                    regs[dst as usize] = if splat {
                        [V::splat(*p); K]
                    } else {
                        load_block::<V, K>(p, at, ctx.stream)
                    };
                }
                Vi::Unary { op, dst, a } => {
                    let x = regs[a as usize];
                    for (d, x) in regs[dst as usize].iter_mut().zip(x) {
                        *d = unary(op, x);
                    }
                }
                Vi::Binary { op, dst, a, b } => {
                    let x = match a {
                        Val::Reg(r) => regs[r as usize],
                        Val::Lit(c) => [V::splat(c); K],
                    };
                    let y = match b {
                        Val::Reg(r) => regs[r as usize],
                        Val::Lit(c) => [V::splat(c); K],
                    };
                    regs[dst as usize] = arith_block(op, &x, &y);
                }
                Vi::Store { src, acc } => {
                    let p = (ctx.base[acc] as *mut f32).offset(offs[acc] as isize);
                    store_block::<V, K>(p, &regs[src as usize], at);
                }
                Vi::Sum { row: true, .. } => {
                    unreachable!("`Prog::new` refuses programs that sum along the row")
                }
                Vi::Sum {
                    src,
                    red,
                    row: false,
                } => {
                    let p = ctx.accs[red].offset(all_offs.red[red] as isize);
                    sum_block::<V, K>(p, &regs[src as usize], at);
                }
            }
        }
    }
}

/// Runs every step on one block `x`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn run_steps<V: crate::simd::Vf32, const K: usize, const LIGHT: bool, const GELU: bool>(
    ctx: &Ctx<'_>,
    steps: &[Step],
    offs: &[i64],
    x: &mut [V; K],
    at: At,
) {
    use crate::simd::arith_block;
    // SAFETY (whole fn): forwarded from `run_v`: every pointer is inside its buffer.
    unsafe {
        let ptr = |acc: usize| (ctx.base[acc] as *mut f32).offset(offs[acc] as isize);
        for s in steps {
            match *s {
                Step::Lit { op, c, first } => {
                    let c = [V::splat(c); K];
                    *x = if first {
                        arith_block(op, &c, x)
                    } else {
                        arith_block(op, x, &c)
                    };
                }
                Step::Same(op) => *x = arith_block(op, x, x),
                Step::Load { .. } if LIGHT => unreachable!("a light chain loads nothing"),
                Step::Load {
                    op,
                    acc,
                    splat,
                    first,
                } => {
                    let p = ptr(acc) as *const f32;
                    let y = if splat {
                        [V::splat(*p); K]
                    } else {
                        load_block::<V, K>(p, at, ctx.stream)
                    };
                    *x = if first {
                        arith_block(op, &y, x)
                    } else {
                        arith_block(op, x, &y)
                    };
                }
                Step::Gelu(_) if !GELU => unreachable!("a chain compiled without GELU has one"),
                Step::Gelu(g) => *x = gelu(g, x),
                Step::Unary(op) if LIGHT => {
                    for v in x.iter_mut() {
                        *v = simple_unary(op, *v);
                    }
                }
                Step::Unary(op) => {
                    for v in x.iter_mut() {
                        *v = unary(op, *v);
                    }
                }
                Step::Store(acc) => store_block::<V, K>(ptr(acc), x, at),
            }
        }
    }
}
