//! The register-resident path for a group that is one f32 chain: a contiguous load, then
//! unary and binary ops each reading only the previous value (and literals), with contiguous
//! stores of any of those values. The tile path writes every op's result to a tile register
//! in L1 and reads it back for the next op, which makes a long chain bound by L1 stores, not
//! by memory; here each block of 64 elements goes through all ops in vector registers, read
//! straight from the source buffer and written straight into the outputs.

use crate::decode::{Lit, Ty};
use crate::exec::Ctx;
use crate::group::{GroupPlan, Ins, Src};
use crate::kernels::{self, In};
use crate::ops::{BinaryOp, Real, UnaryOp};

/// One step of a chain, applied to the running value `x`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Step {
    /// `x op c`, or `c op x` when `first` (add, sub, mul, div: exact in f32).
    Lit {
        op: BinaryOp,
        c: f32,
        first: bool,
    },
    /// `x op x`.
    Same(BinaryOp),
    /// Any other binary op with a literal, computed per element as the tile path does.
    OtherLit {
        op: BinaryOp,
        c: f32,
        first: bool,
    },
    Neg,
    Abs,
    /// Any other unary op, computed per element as the tile path does.
    Unary(UnaryOp),
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

/// The chain a group's program is, if it is one; `last` is each access's stride along the
/// tiled dim.
pub(crate) fn chain_of(plan: &GroupPlan, last: &[i64]) -> Option<Chain> {
    if !plan.reductions.is_empty() {
        return None;
    }
    let mut ins = plan.ins.iter();
    let (load, mut cur) = match ins.next()? {
        &Ins::Load {
            ty: Ty::F32,
            dst,
            acc,
        } if last[acc] == 1 => (acc, dst),
        _ => return None,
    };
    let mut steps = Vec::new();
    // Where each register's value was made: a store of it is placed right after that step
    // (the tile path stores at the end, but a chain holds only its running value). A register
    // is dropped from this list when it is written again.
    let mut made: Vec<(u32, usize)> = vec![(cur, 0)];
    for i in ins {
        let (step, dst) = match *i {
            Ins::Store {
                ty: Ty::F32,
                src,
                acc,
            } if last[acc] == 1 => {
                let &(_, at) = made.iter().find(|&&(r, _)| r == src)?;
                steps.insert(at, Step::Store(acc));
                for m in made.iter_mut().filter(|m| m.1 >= at) {
                    m.1 += 1;
                }
                continue;
            }
            Ins::Unary {
                ty: Ty::F32,
                op,
                dst,
                a,
            } if a == cur => (
                match op {
                    UnaryOp::Neg => Step::Neg,
                    UnaryOp::Abs => Step::Abs,
                    op => Step::Unary(op),
                },
                dst,
            ),
            Ins::Binary {
                ty: Ty::F32,
                op,
                dst,
                a,
                b,
            } => {
                let (l, first) = match (a, b) {
                    (Src::Reg(x), Src::Reg(y)) if x == cur && y == cur => {
                        steps.push(Step::Same(op));
                        made.retain(|m| m.0 != dst);
                        made.push((dst, steps.len()));
                        cur = dst;
                        continue;
                    }
                    (Src::Reg(x), Src::Lit(l)) if x == cur => (l, false),
                    (Src::Lit(l), Src::Reg(y)) if y == cur => (l, true),
                    _ => return None,
                };
                let c = lit_f32(l)?;
                let step = match op {
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                        Step::Lit { op, c, first }
                    }
                    _ => Step::OtherLit { op, c, first },
                };
                (step, dst)
            }
            _ => return None,
        };
        steps.push(step);
        made.retain(|m| m.0 != dst);
        made.push((dst, steps.len()));
        cur = dst;
    }
    // Ops with no single instruction go through memory per block, which is slower than the
    // tile path's kernels over whole tiles: such chains are compute-bound and keep that path.
    let cheap = steps
        .iter()
        .all(|s| matches!(s, Step::Lit { .. } | Step::Neg | Step::Abs | Step::Store(_)));
    (cheap && steps.iter().any(|s| matches!(s, Step::Store(_)))).then_some(Chain { load, steps })
}

/// Elements per block: 8 AVX registers.
const BLOCK: usize = 64;
/// How far ahead (bytes) a large group's source is prefetched.
const PREFETCH: usize = 4096;

/// Runs the chain over `len` elements starting at the accesses' offsets `offs`.
///
/// # Safety
/// The CPU has AVX2 and FMA; the offsets and `len` address elements of the group's buffers
/// (as for the tile path).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn run(ctx: &Ctx<'_>, chain: &Chain, offs: &[i64], len: usize) {
    use std::arch::x86_64::*;
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let src = (ctx.base[chain.load] as *const f32).offset(offs[chain.load] as isize);
        let dst = |acc: usize| (ctx.base[acc] as *mut f32).offset(offs[acc] as isize);
        let stream = ctx.stream
            && chain.steps.iter().all(|s| match *s {
                Step::Store(acc) => (dst(acc) as usize).is_multiple_of(32),
                _ => true,
            });
        let blocks = len / BLOCK;
        let sign = _mm256_set1_ps(-0.0);
        // One block: `x` holds the 64 values, in registers.
        #[inline(always)]
        unsafe fn steps(
            chain: &Chain,
            x: &mut [__m256; 8],
            sign: __m256,
            mut store: impl FnMut(usize, &[__m256; 8]),
        ) {
            // SAFETY (whole fn): AVX is enabled in the caller.
            unsafe {
                for s in &chain.steps {
                    match *s {
                        Step::Lit { op, c, first } => {
                            let c = _mm256_set1_ps(c);
                            macro_rules! each {
                                ($f:ident) => {
                                    if first {
                                        for v in x.iter_mut() {
                                            *v = $f(c, *v);
                                        }
                                    } else {
                                        for v in x.iter_mut() {
                                            *v = $f(*v, c);
                                        }
                                    }
                                };
                            }
                            match op {
                                BinaryOp::Add => each!(_mm256_add_ps),
                                BinaryOp::Sub => each!(_mm256_sub_ps),
                                BinaryOp::Mul => each!(_mm256_mul_ps),
                                _ => each!(_mm256_div_ps),
                            }
                        }
                        Step::Neg => {
                            for v in x.iter_mut() {
                                *v = _mm256_xor_ps(*v, sign);
                            }
                        }
                        Step::Abs => {
                            for v in x.iter_mut() {
                                *v = _mm256_andnot_ps(sign, *v);
                            }
                        }
                        Step::Store(acc) => store(acc, x),
                        Step::Same(op) => {
                            per_element(x, |d, a| kernels::binary(op, d, In::S(a), In::S(a)))
                        }
                        Step::OtherLit { op, c, first } => per_element(x, |d, a| {
                            let (a, c) = (In::S(a), In::C(c));
                            let (l, r) = if first { (c, a) } else { (a, c) };
                            kernels::binary(op, d, l, r)
                        }),
                        Step::Unary(op) => {
                            per_element(x, |d, a| kernels::unary::<f32, true>(op, d, a))
                        }
                    }
                }
            }
        }
        for b in 0..blocks {
            let o = b * BLOCK;
            let mut x = [_mm256_setzero_ps(); 8];
            if ctx.stream {
                // A prefetch never faults, so asking past the buffer's end is harmless.
                let ahead = (src.add(o) as *const i8).wrapping_add(PREFETCH);
                for l in 0..4 {
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * l));
                }
            }
            for (k, v) in x.iter_mut().enumerate() {
                *v = _mm256_loadu_ps(src.add(o + 8 * k));
            }
            steps(chain, &mut x, sign, |acc, x| {
                let p = dst(acc).add(o);
                if stream {
                    for (k, v) in x.iter().enumerate() {
                        _mm256_stream_ps(p.add(8 * k), *v);
                    }
                } else {
                    for (k, v) in x.iter().enumerate() {
                        _mm256_storeu_ps(p.add(8 * k), *v);
                    }
                }
            });
        }
        let o = blocks * BLOCK;
        let n = len - o;
        if n > 0 {
            // The tail goes through a padded block.
            let mut buf = [0f32; BLOCK];
            std::ptr::copy_nonoverlapping(src.add(o), buf.as_mut_ptr(), n);
            let mut x = [_mm256_setzero_ps(); 8];
            for (k, v) in x.iter_mut().enumerate() {
                *v = _mm256_loadu_ps(buf.as_ptr().add(8 * k));
            }
            steps(chain, &mut x, sign, |acc, x| {
                let mut out = [0f32; BLOCK];
                for (k, v) in x.iter().enumerate() {
                    _mm256_storeu_ps(out.as_mut_ptr().add(8 * k), *v);
                }
                std::ptr::copy_nonoverlapping(out.as_ptr(), dst(acc).add(o), n);
            });
        }
    }
}

/// Applies a tile kernel to a block (through memory: for ops with no single instruction, the
/// same kernels the tile path runs).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn per_element(x: &mut [std::arch::x86_64::__m256; 8], f: impl Fn(&mut [f32], &[f32])) {
    use std::arch::x86_64::*;
    // SAFETY (whole fn): AVX is enabled in the caller.
    unsafe {
        let mut buf = [0f32; BLOCK];
        for (k, v) in x.iter().enumerate() {
            _mm256_storeu_ps(buf.as_mut_ptr().add(8 * k), *v);
        }
        let mut out = [0f32; BLOCK];
        f(&mut out, &buf);
        for (k, v) in x.iter_mut().enumerate() {
            *v = _mm256_loadu_ps(out.as_ptr().add(8 * k));
        }
    }
}
