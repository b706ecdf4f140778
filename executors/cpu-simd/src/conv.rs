//! `prims.convolution` on the CPU as im2col and GEMM, the way PyTorch's CPU fallback and most
//! inference engines lower it: per batch item and group, the input windows are unrolled into a
//! `[C_in/G * K, S]` column matrix (zeros where a window reaches into the padding) and multiplied
//! by the group's weights viewed as `[C_out/G, C_in/G * K]`; the bias is added after.

use crate::decode::{fail, Cx, Op, Ty, R};
use crate::exec::Bufs;
use crate::group::BufId;
use crate::layout::Layout;
use gemm::Parallelism;
use thunder_abi::ArgView;

/// Below this many multiply-adds a GEMM runs on the calling thread (as in `stages.rs`).
const PAR_MIN: usize = 1 << 23;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConvGeometry {
    pub(crate) stride: Vec<usize>,
    pub(crate) padding: Vec<usize>,
    pub(crate) dilation: Vec<usize>,
    pub(crate) groups: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct ConvPlan {
    pub(crate) ty: Ty,
    pub(crate) a: (BufId, Layout),
    pub(crate) w: (BufId, Layout),
    pub(crate) bias: Option<(BufId, Layout)>,
    pub(crate) out: BufId,
    /// `[N, C_in, *S_in]`, `[C_out, C_in/G, *K]`, `[N, C_out, *S_out]`.
    pub(crate) a_shape: Vec<usize>,
    pub(crate) w_shape: Vec<usize>,
    pub(crate) out_shape: Vec<usize>,
    pub(crate) geom: ConvGeometry,
}

impl Cx<'_> {
    /// `convolution(a, weight, bias, stride, padding, dilation, groups)` on f32 or f64.
    pub(crate) fn convolution(&self) -> R<Op> {
        self.arity(7)?;
        let ((a, ta, sa), (w, tw, sw)) = (self.tensor(0)?, self.tensor(1)?);
        if ta != tw || !ta.is_float() {
            return fail("input and weight must both be f32 or both f64");
        }
        let bias = match self.args.get(2) {
            Some(ArgView::None) => None,
            _ => {
                let (b, tb, sb) = self.tensor(2)?;
                if tb != ta || sb.len() != 1 || sb[0] != sw[0] {
                    return fail("bias must be one value per output channel, of the input's dtype");
                }
                Some(b)
            }
        };
        let spatial = sa.len().saturating_sub(2);
        let list = |i: usize| -> R<Vec<usize>> {
            match self.args.get(i) {
                Some(ArgView::Ints(v)) if v.len() == spatial => v
                    .iter()
                    .map(|&x| usize::try_from(x).map_err(|_| format!("argument {i}: negative")))
                    .collect(),
                other => fail(format!(
                    "argument {i} must be {spatial} ints, got {other:?}"
                )),
            }
        };
        let groups = match self.args.get(6) {
            Some(ArgView::Int(g)) if *g >= 1 => *g as usize,
            other => return fail(format!("argument 6 must be a positive int, got {other:?}")),
        };
        let geom = ConvGeometry {
            stride: list(3)?,
            padding: list(4)?,
            dilation: list(5)?,
            groups,
        };
        if spatial == 0
            || sw.len() != sa.len()
            || sw[1].checked_mul(groups) != Some(sa[1])
            || sw[0] % groups != 0
        {
            return fail("expects a [N, C_in, *S] input and [C_out, C_in/groups, *K] weights");
        }
        if geom.stride.contains(&0) || geom.dilation.contains(&0) {
            return fail("strides and dilations must be positive");
        }
        self.expect_out(ta, &output_shape(&sa, &sw, &geom))?;
        Ok(Op::Conv { a, w, bias, geom })
    }
}

/// The output's shape; a window larger than the padded input gives an empty spatial dim.
pub(crate) fn output_shape(a: &[usize], w: &[usize], g: &ConvGeometry) -> Vec<usize> {
    let mut out = vec![a[0], w[0]];
    for d in 0..a.len() - 2 {
        // Saturating: absurd geometry (refused by meta before a plugin sees it) gives an empty
        // output rather than an overflow.
        let span = g.dilation[d]
            .saturating_mul(w[d + 2].max(1) - 1)
            .saturating_add(1);
        let padded = a[d + 2].saturating_add(g.padding[d].saturating_mul(2));
        out.push(if padded < span || w[d + 2] == 0 {
            0
        } else {
            (padded - span) / g.stride[d] + 1
        });
    }
    out
}

trait Float: Copy + Default + 'static + std::ops::Add<Output = Self> {
    fn one() -> Self;
}
impl Float for f32 {
    fn one() -> Self {
        1.0
    }
}
impl Float for f64 {
    fn one() -> Self {
        1.0
    }
}

pub(crate) fn run(p: &ConvPlan, bufs: &Bufs) {
    match p.ty {
        Ty::F32 => run_typed::<f32>(p, bufs),
        Ty::F64 => run_typed::<f64>(p, bufs),
        // Refused by decode.
        Ty::B8 | Ty::I64 => {}
    }
}

fn run_typed<T: Float>(p: &ConvPlan, bufs: &Bufs) {
    let (n, c_out) = (p.out_shape[0], p.out_shape[1]);
    let s_out: usize = p.out_shape[2..].iter().product();
    let g = p.geom.groups;
    let (cg_in, cg_out) = (p.a_shape[1] / g, c_out / g);
    let k: usize = p.w_shape[2..].iter().product();
    let ck = cg_in * k;
    let out = bufs.ptr(p.out) as *mut T;
    if n * c_out * s_out == 0 {
        return;
    }
    // SAFETY: the layouts address elements inside their buffers (checked when the region was
    // compiled against the buffers' sizes) and the output holds N * C_out * S_out elements.
    unsafe {
        if ck == 0 {
            for i in 0..n * c_out * s_out {
                *out.add(i) = T::default();
            }
        } else {
            // Weights are almost always contiguous (graph inputs): read them in place; a view
            // is packed once per call.
            let (wbuf, wlayout) = &p.w;
            let packed;
            let weights: *const T = if wlayout.strides == crate::layout::row_major(&p.w_shape) {
                (bufs.ptr(*wbuf) as *const T).offset(wlayout.offset as isize)
            } else {
                packed = packed_weights::<T>(p, bufs);
                packed.as_ptr()
            };
            let mut col = vec![T::default(); ck * s_out];
            let par = if cg_out * s_out * ck >= PAR_MIN {
                Parallelism::Rayon(0)
            } else {
                Parallelism::None
            };
            for b in 0..n {
                for gi in 0..g {
                    im2col(p, bufs, b, gi * cg_in, cg_in, &mut col);
                    let dst = out.add((b * c_out + gi * cg_out) * s_out);
                    gemm::gemm(
                        cg_out,
                        s_out,
                        ck,
                        dst,
                        1,
                        s_out as isize,
                        false,
                        weights.add(gi * cg_out * ck),
                        1,
                        ck as isize,
                        col.as_ptr(),
                        1,
                        s_out as isize,
                        T::default(),
                        T::one(),
                        false,
                        false,
                        false,
                        par,
                    );
                }
            }
        }
        if let Some((buf, layout)) = &p.bias {
            let bias = bufs.ptr(*buf) as *const T;
            for b in 0..n {
                for c in 0..c_out {
                    let v = *bias.offset((layout.offset + c as i64 * layout.strides[0]) as isize);
                    let row = out.add((b * c_out + c) * s_out);
                    for s in 0..s_out {
                        *row.add(s) = *row.add(s) + v;
                    }
                }
            }
        }
    }
}

/// The weights as a contiguous `[C_out, C_in/G * K]` matrix.
///
/// # Safety
/// As for `run_typed`.
unsafe fn packed_weights<T: Float>(p: &ConvPlan, bufs: &Bufs) -> Vec<T> {
    let (buf, layout) = &p.w;
    let base = bufs.ptr(*buf) as *const T;
    let total: usize = p.w_shape.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut index = vec![0usize; p.w_shape.len()];
    for _ in 0..total {
        let off: i64 = layout.offset
            + index
                .iter()
                .zip(&layout.strides)
                .map(|(&i, &s)| i as i64 * s)
                .sum::<i64>();
        // SAFETY: forwarded from the caller.
        out.push(unsafe { *base.offset(off as isize) });
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < p.w_shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// Fills `col[(c * K + kernel index) * S_out + output index]` with the input element that
/// kernel position sees from that output position (zero in the padding), for batch item `b`
/// and input channels `c0..c0 + channels`. The last spatial dim is copied as a strided run
/// between the bounds where the window is inside the input, so the per-element work is one
/// load and one store.
///
/// # Safety
/// As for `run_typed`.
unsafe fn im2col<T: Float>(
    p: &ConvPlan,
    bufs: &Bufs,
    b: usize,
    c0: usize,
    channels: usize,
    col: &mut [T],
) {
    let (buf, layout) = &p.a;
    let base = bufs.ptr(*buf) as *const T;
    let spatial = p.a_shape.len() - 2;
    let last = spatial - 1;
    let kshape = &p.w_shape[2..];
    let oshape = &p.out_shape[2..];
    let k: usize = kshape.iter().product();
    let s_out: usize = oshape.iter().product();
    let width = oshape[last];
    let outer: usize = oshape[..last].iter().product();
    let (stride, dil, pad) = (&p.geom.stride, &p.geom.dilation, &p.geom.padding);
    let in_last = p.a_shape[2 + last] as i64;
    let step = stride[last] as i64 * layout.strides[2 + last];
    let mut kidx = vec![0usize; spatial];
    let mut oidx = vec![0usize; last];
    for c in 0..channels {
        let chan =
            layout.offset + b as i64 * layout.strides[0] + (c0 + c) as i64 * layout.strides[1];
        kidx.iter_mut().for_each(|x| *x = 0);
        for kk in 0..k {
            // Output positions o of the last dim whose input position o * stride + shift is
            // inside [0, in_last).
            let shift = (kidx[last] * dil[last]) as i64 - pad[last] as i64;
            let s_last = stride[last] as i64;
            let lo = if shift >= 0 {
                0
            } else {
                (-shift + s_last - 1) / s_last
            };
            let hi = if in_last - shift <= 0 {
                0
            } else {
                ((in_last - shift + s_last - 1) / s_last).min(width as i64)
            };
            let (lo, hi) = (lo.min(width as i64) as usize, hi.max(0) as usize);
            let rows = &mut col[(c * k + kk) * s_out..(c * k + kk + 1) * s_out];
            oidx.iter_mut().for_each(|x| *x = 0);
            for row in rows.chunks_exact_mut(width.max(1)).take(outer) {
                let mut off = chan + shift * layout.strides[2 + last];
                let mut inside = true;
                for d in 0..last {
                    let pos = (oidx[d] * stride[d] + kidx[d] * dil[d]) as i64 - pad[d] as i64;
                    inside &= pos >= 0 && pos < p.a_shape[d + 2] as i64;
                    off += pos * layout.strides[d + 2];
                }
                if !inside || lo >= hi {
                    row.iter_mut().for_each(|x| *x = T::default());
                } else {
                    row[..lo].iter_mut().for_each(|x| *x = T::default());
                    row[hi..].iter_mut().for_each(|x| *x = T::default());
                    let mut src = off + lo as i64 * step;
                    for slot in &mut row[lo..hi] {
                        // SAFETY: positions lo..hi of this row are inside the input.
                        *slot = unsafe { *base.offset(src as isize) };
                        src += step;
                    }
                }
                for d in (0..last).rev() {
                    oidx[d] += 1;
                    if oidx[d] < oshape[d] {
                        break;
                    }
                    oidx[d] = 0;
                }
            }
            for d in (0..spatial).rev() {
                kidx[d] += 1;
                if kidx[d] < kshape[d] {
                    break;
                }
                kidx[d] = 0;
            }
        }
    }
}
