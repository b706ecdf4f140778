//! One tile of a group's register program: each instruction runs one kernel over at most
//! `TILE` elements of its registers. Registers are slices of per-type register files, taken
//! through raw pointers because an instruction writes one register of a file while reading
//! others of the same file (the allocator never gives a destination the register of a source).

use crate::decode::{Lit, Ty};
use crate::exec::{Ctx, TILE};
use crate::group::{Ins, Src};
use crate::kernels::{self, In};
use crate::ops::{Real, ReduceOp};

/// Tile registers of each type.
pub(crate) struct RegFile {
    pub(crate) f32: Vec<f32>,
    pub(crate) f64: Vec<f64>,
    pub(crate) b8: Vec<u8>,
    pub(crate) i64: Vec<i64>,
}

/// A register of a file as a slice of `len` elements.
#[inline(always)]
unsafe fn reg<'a, T>(file: *mut T, r: u32, len: usize) -> &'a mut [T] {
    // SAFETY: the caller passes a register below the file's count.
    unsafe { std::slice::from_raw_parts_mut(file.add(r as usize * TILE), len) }
}

/// A register read as a shared slice (two sources may be the same register).
#[inline(always)]
unsafe fn rd<'a, T>(file: *mut T, r: u32, len: usize) -> &'a [T] {
    // SAFETY: the caller passes a register below the file's count.
    unsafe { std::slice::from_raw_parts(file.add(r as usize * TILE), len) }
}

#[inline(always)]
unsafe fn src<'a, T: Copy>(file: *mut T, s: Src, len: usize, lit: impl Fn(Lit) -> T) -> In<'a, T> {
    match s {
        // SAFETY: forwarded.
        Src::Reg(r) => In::S(unsafe { rd(file, r, len) }),
        Src::Lit(l) => In::C(lit(l)),
    }
}

fn lit_f64(l: Lit) -> f64 {
    match l {
        Lit::F(v) => v,
        Lit::I(v) => v as f64,
        Lit::B(v) => f64::from(u8::from(v)),
    }
}

#[inline(always)]
unsafe fn load<T: Copy>(base: *mut u8, off: i64, stride: i64, d: &mut [T], prefetch: bool) {
    let _ = prefetch;
    // SAFETY (whole fn): every element read lies inside the buffer, see `run_items`.
    let p = unsafe { (base as *const T).offset(off as isize) };
    match stride {
        1 => unsafe {
            std::ptr::copy_nonoverlapping(p, d.as_mut_ptr(), d.len());
            // Ask for the next tile's input while this one is computed: the hardware
            // prefetchers do not run far enough ahead to hide DRAM latency at this tile size.
            #[cfg(target_arch = "x86_64")]
            if prefetch {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                let (next, bytes) = (p.add(d.len()) as *const i8, std::mem::size_of_val(d));
                let mut o = 0;
                while o < bytes {
                    // A prefetch never faults, so reading past the buffer's end is harmless.
                    _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(o));
                    o += 64;
                }
            }
        },
        0 => d.fill(unsafe { *p }),
        // Every other element (pooling windows and strided slices): with the stride known
        // here LLVM loads whole vectors and shuffles out the even lanes. As a general stride
        // it loaded one element at a time, and ResNet-50's 3x3 max pool (nine stride-2
        // slices) took 423 us at b1, ten times ORT's.
        2 => {
            for (j, o) in d.iter_mut().enumerate() {
                *o = unsafe { *p.add(2 * j) };
            }
        }
        s => {
            for (j, o) in d.iter_mut().enumerate() {
                *o = unsafe { *p.offset(j as isize * s as isize) };
            }
        }
    }
}

#[inline(always)]
unsafe fn store<T: Copy, const FMA: bool>(
    base: *mut u8,
    off: i64,
    stride: i64,
    v: &[T],
    stream: bool,
) {
    // SAFETY (whole fn): as for `load`; stores of one group never overlap across chunks.
    let p = unsafe { (base as *mut T).offset(off as isize) };
    let bytes = std::mem::size_of_val(v);
    #[cfg(target_arch = "x86_64")]
    if FMA && stream && stride == 1 && bytes >= 256 {
        // SAFETY: `FMA` is only set in the loops compiled for AVX2 and AVX-512.
        return unsafe { crate::exec::stream_copy(p as *mut u8, v.as_ptr() as *const u8, bytes) };
    }
    let _ = (stream, bytes);
    if stride == 1 {
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    } else {
        for (j, &x) in v.iter().enumerate() {
            unsafe { *p.offset(j as isize * stride as isize) = x };
        }
    }
}

#[inline(always)]
unsafe fn reduce_into<T: Real>(op: ReduceOp, a: &[T], acc: *mut f64, stride: i64) {
    // SAFETY (whole fn): the accumulator indices are output indices, inside the output.
    if stride == 0 {
        unsafe { *acc = kernels::combine(op, *acc, kernels::reduce_tile(op, a)) };
    } else if stride == 1 {
        // Contiguous accumulators (a fold over an outer dim): a loop LLVM vectorizes.
        let acc = unsafe { std::slice::from_raw_parts_mut(acc, a.len()) };
        match op {
            ReduceOp::Sum => {
                for (p, &x) in acc.iter_mut().zip(a) {
                    *p += x.to_f64();
                }
            }
            ReduceOp::Amax | ReduceOp::Amin => {
                for (p, &x) in acc.iter_mut().zip(a) {
                    *p = kernels::combine(op, *p, x.to_f64());
                }
            }
        }
    } else {
        for (j, &x) in a.iter().enumerate() {
            let p = unsafe { acc.offset(j as isize * stride as isize) };
            unsafe { *p = kernels::combine(op, *p, x.to_f64()) };
        }
    }
}

#[inline(always)]
unsafe fn float_ins<T: Real, const FMA: bool>(file: *mut T, b8: *mut u8, ins: &Ins, len: usize) {
    let lit = |l: Lit| T::from_f64(lit_f64(l));
    // SAFETY (whole fn): registers are below their file's count; a destination is never a
    // source of the same instruction.
    unsafe {
        match *ins {
            Ins::Unary { op, dst, a, .. } => {
                kernels::unary::<T, FMA>(op, reg(file, dst, len), rd(file, a, len))
            }
            Ins::Binary { op, dst, a, b, .. } => match (a, b) {
                (Src::Reg(x), Src::Lit(Lit::F(v))) if !T::exact(v) => {
                    kernels::binary_wide(op, reg(file, dst, len), rd(file, x, len), v, false)
                }
                (Src::Lit(Lit::F(v)), Src::Reg(x)) if !T::exact(v) => {
                    kernels::binary_wide(op, reg(file, dst, len), rd(file, x, len), v, true)
                }
                _ => kernels::binary(
                    op,
                    reg(file, dst, len),
                    src(file, a, len, lit),
                    src(file, b, len, lit),
                ),
            },
            Ins::Where {
                dst, pred, a, b, ..
            } => kernels::where_(
                reg(file, dst, len),
                rd(b8, pred, len),
                src(file, a, len, lit),
                src(file, b, len, lit),
            ),
            Ins::Compare { op, dst, a, b, .. } => match (a, b) {
                // A literal this type holds exactly (a ReLU's 0.0) compares the same in it as
                // in f64, without widening every element.
                (Src::Reg(_), Src::Lit(Lit::F(v))) | (Src::Lit(Lit::F(v)), Src::Reg(_))
                    if T::exact(v) =>
                {
                    kernels::compare(
                        op,
                        reg(b8, dst, len),
                        src(file, a, len, lit),
                        src(file, b, len, lit),
                    )
                }
                (Src::Reg(x), Src::Lit(l)) => kernels::compare_wide(
                    op,
                    reg(b8, dst, len),
                    rd(file, x, len),
                    T::to_f64,
                    lit_f64(l),
                    false,
                ),
                (Src::Lit(l), Src::Reg(x)) => kernels::compare_wide(
                    op,
                    reg(b8, dst, len),
                    rd(file, x, len),
                    T::to_f64,
                    lit_f64(l),
                    true,
                ),
                _ => kernels::compare(
                    op,
                    reg(b8, dst, len),
                    src(file, a, len, lit),
                    src(file, b, len, lit),
                ),
            },
            _ => {}
        }
    }
}

#[inline(always)]
pub(crate) unsafe fn exec_tile<const FMA: bool>(
    ctx: &Ctx<'_>,
    regs: &mut RegFile,
    offs: &[i64],
    red_offs: &[i64],
    len: usize,
) {
    // SAFETY: forwarded.
    unsafe { exec::<FMA>(ctx, regs, offs, red_offs, len, None) }
}

/// A tile of `n` whole rows of `width` elements: `offs[a * per + q]` is access `a`'s offset
/// of row `q`, and `red_offs[k * per + q]` reduction `k`'s accumulator offset of row `q`.
/// Loads, stores and folds go row by row; the other ops run once over all `n * width`.
#[inline(always)]
pub(crate) unsafe fn exec_rows<const FMA: bool>(
    ctx: &Ctx<'_>,
    regs: &mut RegFile,
    offs: &[i64],
    red_offs: &[i64],
    per: usize,
    n: usize,
    width: usize,
) {
    // SAFETY: forwarded.
    unsafe { exec::<FMA>(ctx, regs, offs, red_offs, n * width, Some((per, width))) }
}

#[inline(always)]
unsafe fn exec<const FMA: bool>(
    ctx: &Ctx<'_>,
    regs: &mut RegFile,
    offs: &[i64],
    red_offs: &[i64],
    len: usize,
    rows: Option<(usize, usize)>,
) {
    let (f32p, f64p, b8p, i64p) = (
        regs.f32.as_mut_ptr(),
        regs.f64.as_mut_ptr(),
        regs.b8.as_mut_ptr(),
        regs.i64.as_mut_ptr(),
    );
    // SAFETY (whole fn): see `run_items`.
    unsafe {
        for ins in &ctx.plan.ins {
            match *ins {
                Ins::Load { ty, dst, acc } if rows.is_some() && ctx.rows_contig[acc] => {
                    // The tile's rows are one contiguous run (see `Ctx::rows_contig`).
                    let (per, _) = rows.unwrap_or((1, len));
                    let (b, o) = (ctx.base[acc], offs[acc * per]);
                    match ty {
                        Ty::F32 => load(b, o, 1, reg(f32p, dst, len), false),
                        Ty::F64 => load(b, o, 1, reg(f64p, dst, len), false),
                        Ty::B8 => load(b, o, 1, reg(b8p, dst, len), false),
                        Ty::I64 => load(b, o, 1, reg(i64p, dst, len), false),
                    }
                }
                Ins::Store { ty, src: r, acc } if rows.is_some() && ctx.rows_contig[acc] => {
                    let (per, _) = rows.unwrap_or((1, len));
                    let (b, o, st) = (ctx.base[acc], offs[acc * per], ctx.stream);
                    match ty {
                        Ty::F32 => store::<_, FMA>(b, o, 1, rd(f32p, r, len), st),
                        Ty::F64 => store::<_, FMA>(b, o, 1, rd(f64p, r, len), st),
                        Ty::B8 => store::<_, FMA>(b, o, 1, rd(b8p, r, len), st),
                        Ty::I64 => store::<_, FMA>(b, o, 1, rd(i64p, r, len), st),
                    }
                }
                Ins::Load { ty, dst, acc } if rows.is_some() => {
                    let (per, w) = rows.unwrap_or((1, len));
                    let (b, s) = (ctx.base[acc], ctx.last[acc]);
                    for (q, k) in (0..len).step_by(w).enumerate() {
                        let o = offs[acc * per + q];
                        match ty {
                            Ty::F32 => load(b, o, s, &mut reg(f32p, dst, len)[k..k + w], false),
                            Ty::F64 => load(b, o, s, &mut reg(f64p, dst, len)[k..k + w], false),
                            Ty::B8 => load(b, o, s, &mut reg(b8p, dst, len)[k..k + w], false),
                            Ty::I64 => load(b, o, s, &mut reg(i64p, dst, len)[k..k + w], false),
                        }
                    }
                }
                Ins::Store { ty, src: r, acc } if rows.is_some() => {
                    let (per, w) = rows.unwrap_or((1, len));
                    let (b, s, st) = (ctx.base[acc], ctx.last[acc], ctx.stream);
                    for (q, k) in (0..len).step_by(w).enumerate() {
                        let o = offs[acc * per + q];
                        match ty {
                            Ty::F32 => store::<_, FMA>(b, o, s, &rd(f32p, r, len)[k..k + w], st),
                            Ty::F64 => store::<_, FMA>(b, o, s, &rd(f64p, r, len)[k..k + w], st),
                            Ty::B8 => store::<_, FMA>(b, o, s, &rd(b8p, r, len)[k..k + w], st),
                            Ty::I64 => store::<_, FMA>(b, o, s, &rd(i64p, r, len)[k..k + w], st),
                        }
                    }
                }
                Ins::Load { ty, dst, acc } => {
                    let (b, o, s) = (ctx.base[acc], offs[acc], ctx.last[acc]);
                    let pf = ctx.stream;
                    match ty {
                        Ty::F32 => load(b, o, s, reg(f32p, dst, len), pf),
                        Ty::F64 => load(b, o, s, reg(f64p, dst, len), pf),
                        Ty::B8 => load(b, o, s, reg(b8p, dst, len), pf),
                        Ty::I64 => load(b, o, s, reg(i64p, dst, len), pf),
                    }
                }
                Ins::Store { ty, src: r, acc } => {
                    let (b, o, s) = (ctx.base[acc], offs[acc], ctx.last[acc]);
                    let st = ctx.stream;
                    match ty {
                        Ty::F32 => store::<_, FMA>(b, o, s, rd(f32p, r, len), st),
                        Ty::F64 => store::<_, FMA>(b, o, s, rd(f64p, r, len), st),
                        Ty::B8 => store::<_, FMA>(b, o, s, rd(b8p, r, len), st),
                        Ty::I64 => store::<_, FMA>(b, o, s, rd(i64p, r, len), st),
                    }
                }
                Ins::Splat { ty, dst, value } => match ty {
                    Ty::F32 => reg(f32p, dst, len).fill(lit_f64(value) as f32),
                    Ty::F64 => reg(f64p, dst, len).fill(lit_f64(value)),
                    Ty::B8 => reg(b8p, dst, len).fill(u8::from(lit_f64(value) != 0.0)),
                    Ty::I64 => reg(i64p, dst, len).fill(match value {
                        Lit::I(v) => v,
                        l => lit_f64(l) as i64,
                    }),
                },
                Ins::Reduce { ty, src: r, red } if rows.is_some() => {
                    let (per, w) = rows.unwrap_or((1, len));
                    let op = ctx.plan.reductions[red].op;
                    let stride = ctx.red_last[red];
                    for (q, k) in (0..len).step_by(w).enumerate() {
                        let acc = ctx.accs[red].offset(red_offs[red * per + q] as isize);
                        match ty {
                            Ty::F32 => reduce_into(op, &rd(f32p, r, len)[k..k + w], acc, stride),
                            Ty::F64 => reduce_into(op, &rd(f64p, r, len)[k..k + w], acc, stride),
                            Ty::B8 | Ty::I64 => {}
                        }
                    }
                }
                Ins::Reduce { ty, src: r, red } => {
                    let op = ctx.plan.reductions[red].op;
                    let acc = ctx.accs[red].offset(red_offs[red] as isize);
                    match ty {
                        Ty::F32 => reduce_into(op, rd(f32p, r, len), acc, ctx.red_last[red]),
                        Ty::F64 => reduce_into(op, rd(f64p, r, len), acc, ctx.red_last[red]),
                        Ty::B8 | Ty::I64 => {}
                    }
                }
                Ins::Convert { from, to, dst, a } => {
                    convert(from, to, f32p, f64p, b8p, i64p, dst, a, len)
                }
                Ins::Compare {
                    ty: Ty::I64,
                    op,
                    dst,
                    a,
                    b,
                } => match (a, b) {
                    (Src::Reg(x), Src::Lit(Lit::F(v))) => kernels::compare_wide(
                        op,
                        reg(b8p, dst, len),
                        rd(i64p, x, len),
                        |x| x as f64,
                        v,
                        false,
                    ),
                    (Src::Lit(Lit::F(v)), Src::Reg(x)) => kernels::compare_wide(
                        op,
                        reg(b8p, dst, len),
                        rd(i64p, x, len),
                        |x| x as f64,
                        v,
                        true,
                    ),
                    _ => {
                        let lit = |l: Lit| match l {
                            Lit::I(v) => v,
                            l => lit_f64(l) as i64,
                        };
                        kernels::compare(
                            op,
                            reg(b8p, dst, len),
                            src(i64p, a, len, lit),
                            src(i64p, b, len, lit),
                        )
                    }
                },
                Ins::Compare {
                    ty: Ty::B8,
                    op,
                    dst,
                    a,
                    b,
                } => {
                    let lit = |l: Lit| u8::from(lit_f64(l) != 0.0);
                    kernels::compare(
                        op,
                        reg(b8p, dst, len),
                        src(b8p, a, len, lit),
                        src(b8p, b, len, lit),
                    )
                }
                Ins::Unary { ty, .. }
                | Ins::Binary { ty, .. }
                | Ins::Where { ty, .. }
                | Ins::Compare { ty, .. } => match ty {
                    Ty::F32 => float_ins::<f32, FMA>(f32p, b8p, ins, len),
                    Ty::F64 => float_ins::<f64, FMA>(f64p, b8p, ins, len),
                    Ty::B8 | Ty::I64 => {}
                },
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn convert(
    from: Ty,
    to: Ty,
    f32p: *mut f32,
    f64p: *mut f64,
    b8p: *mut u8,
    i64p: *mut i64,
    dst: u32,
    a: u32,
    len: usize,
) {
    // SAFETY (whole fn): as in `exec_tile`; when `from == to` the two registers are distinct.
    unsafe {
        match (from, to) {
            (Ty::F32, Ty::F32) => kernels::convert(reg(f32p, dst, len), rd(f32p, a, len), |x| x),
            (Ty::F64, Ty::F64) => kernels::convert(reg(f64p, dst, len), rd(f64p, a, len), |x| x),
            (Ty::B8, Ty::B8) => kernels::convert(reg(b8p, dst, len), rd(b8p, a, len), |x| x),
            (Ty::I64, Ty::I64) => kernels::convert(reg(i64p, dst, len), rd(i64p, a, len), |x| x),
            (Ty::F32, Ty::F64) => {
                kernels::convert(reg(f64p, dst, len), rd(f32p, a, len), f64::from)
            }
            (Ty::F64, Ty::F32) => {
                kernels::convert(reg(f32p, dst, len), rd(f64p, a, len), |x| x as f32)
            }
            (Ty::B8, Ty::F32) => kernels::convert(reg(f32p, dst, len), rd(b8p, a, len), f32::from),
            (Ty::B8, Ty::F64) => kernels::convert(reg(f64p, dst, len), rd(b8p, a, len), f64::from),
            (Ty::I64, Ty::F32) => {
                kernels::convert(reg(f32p, dst, len), rd(i64p, a, len), |x| x as f32)
            }
            (Ty::I64, Ty::F64) => {
                kernels::convert(reg(f64p, dst, len), rd(i64p, a, len), |x| x as f64)
            }
            (Ty::F32, Ty::B8) => {
                kernels::convert(reg(b8p, dst, len), rd(f32p, a, len), |x| u8::from(x != 0.0))
            }
            (Ty::F64, Ty::B8) => {
                kernels::convert(reg(b8p, dst, len), rd(f64p, a, len), |x| u8::from(x != 0.0))
            }
            // Refused by decode.
            (Ty::B8 | Ty::F32 | Ty::F64, Ty::I64) | (Ty::I64, Ty::B8) => {}
        }
    }
}
