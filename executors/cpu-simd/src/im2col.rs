//! The im2col step of `prims.convolution` on the CPU (see `conv_run.rs`): a block of whole
//! output rows of one batch item is unrolled into the column matrix its GEMM reads.

use crate::conv::ConvPlan;
use crate::exec::Bufs;
use crate::ops::Real;

/// Fills `col[(c * K + kernel index) * cols + j]` with the input element that kernel position
/// sees from output position `r0 * width + j` (zero in the padding), for batch item `b`,
/// input channels `c0..c0 + channels` and output rows `r0..r1` (`cols = (r1 - r0) * width`).
/// The last spatial dim is copied as a strided run between the bounds where the window is
/// inside the input, so the per-element work is one load and one store.
///
/// # Safety
/// As for `run_typed`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn im2col<T: Real + Default>(
    p: &ConvPlan,
    bufs: &Bufs,
    b: usize,
    c0: usize,
    channels: usize,
    r0: usize,
    r1: usize,
    col: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if crate::exec::isa_level() >= 2 {
        return im2col_avx512(p, bufs, b, c0, channels, r0, r1, col);
    }
    im2col_body(p, bufs, b, c0, channels, r0, r1, col)
}

/// [`im2col`] compiled for AVX-512 (the copies and the stride-2 pairs vectorise wider).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn im2col_avx512<T: Real + Default>(
    p: &ConvPlan,
    bufs: &Bufs,
    b: usize,
    c0: usize,
    channels: usize,
    r0: usize,
    r1: usize,
    col: &mut [T],
) {
    im2col_body(p, bufs, b, c0, channels, r0, r1, col)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn im2col_body<T: Real + Default>(
    p: &ConvPlan,
    bufs: &Bufs,
    b: usize,
    c0: usize,
    channels: usize,
    r0: usize,
    r1: usize,
    col: &mut [T],
) {
    if same_width(p) {
        return im2col_same_width(p, bufs, b, c0, channels, r0, r1, col);
    }
    if plane_2d(p) {
        return im2col_2d(p, bufs, b, c0, channels, r0, r1, col);
    }
    let (buf, layout) = &p.a;
    let base = bufs.ptr(*buf) as *const T;
    let spatial = p.a_shape.len() - 2;
    let last = spatial - 1;
    let kshape = &p.w_shape[2..];
    let oshape = &p.out_shape[2..];
    let k: usize = kshape.iter().product();
    let width = oshape[last];
    let cols = (r1 - r0) * width;
    let (stride, dil, pad) = (&p.geom.stride, &p.geom.dilation, &p.geom.padding);
    let in_last = p.a_shape[2 + last] as i64;
    let step = stride[last] as i64 * layout.strides[2 + last];
    let s_last = stride[last] as i64;
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
            let rows = &mut col[(c * k + kk) * cols..(c * k + kk + 1) * cols];
            // The output row r0 as a multi-index over the dims before the last.
            let mut rem = r0;
            for d in (0..last).rev() {
                oidx[d] = rem % oshape[d];
                rem /= oshape[d];
            }
            for row in rows.chunks_exact_mut(width.max(1)) {
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
                    if step == 1 {
                        let from = std::slice::from_raw_parts(base.offset(src as isize), hi - lo);
                        row[lo..hi].copy_from_slice(from);
                    } else if step == 2 {
                        // Every other element of a contiguous run (stride-2 convolutions: the
                        // 7x7 stem, downsampling 3x3 and 1x1): pairs, so the loop vectorises.
                        // The odd elements between two in-bounds ones are in bounds too.
                        let k = hi - lo;
                        let from = std::slice::from_raw_parts(base.offset(src as isize), 2 * k - 1);
                        let (body, last) = row[lo..hi].split_at_mut(k - 1);
                        for (slot, pair) in body.iter_mut().zip(from.chunks_exact(2)) {
                            *slot = pair[0];
                        }
                        last[0] = from[2 * (k - 1)];
                    } else {
                        for slot in &mut row[lo..hi] {
                            *slot = *base.offset(src as isize);
                            src += step;
                        }
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

/// A 2-D, stride-1, undilated convolution whose output rows are as wide as the input's and
/// whose input channel planes are contiguous (ResNet's padded 3x3s): output row `oh` of kernel
/// position `(kh, kw)` reads input row `oh + kh - pad_h` shifted by `kw - pad_w`, so a block's
/// rows are one contiguous run of the input plane. [`im2col_same_width`] copies that run at
/// once and then zeroes the few columns whose window falls into the side padding, instead of
/// one short copy per row (at 14x14, 56-byte copies were most of im2col's time).
fn same_width(p: &ConvPlan) -> bool {
    let (s, l) = (&p.a_shape, &p.a.1);
    s.len() == 4
        && p.geom.stride == [1, 1]
        && p.geom.dilation == [1, 1]
        && p.out_shape[3] == s[3]
        && s[3] > 0
        && l.strides[3] == 1
        && (l.strides[2] == s[3] as i64 || s[2] == 1)
}

/// [`im2col`] for the [`same_width`] case.
///
/// # Safety
/// As for `run_typed`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn im2col_same_width<T: Real + Default>(
    p: &ConvPlan,
    bufs: &Bufs,
    b: usize,
    c0: usize,
    channels: usize,
    r0: usize,
    r1: usize,
    col: &mut [T],
) {
    let (buf, layout) = &p.a;
    let base = bufs.ptr(*buf) as *const T;
    let (h_in, w) = (p.a_shape[2] as i64, p.a_shape[3]);
    let plane = h_in * w as i64;
    let (k_h, k_w) = (p.w_shape[2], p.w_shape[3]);
    let (pad_h, pad_w) = (p.geom.padding[0] as i64, p.geom.padding[1] as i64);
    let cols = (r1 - r0) * w;
    let (r0i, r1i) = (r0 as i64, r1 as i64);
    for c in 0..channels {
        let chan =
            layout.offset + b as i64 * layout.strides[0] + (c0 + c) as i64 * layout.strides[1];
        for kh in 0..k_h {
            // Output rows whose input row oh + kh - pad_h is inside the input.
            let shift_h = kh as i64 - pad_h;
            let lo_h = (-shift_h).clamp(r0i, r1i);
            let hi_h = (h_in - shift_h).clamp(lo_h, r1i);
            let (top, body) = ((lo_h - r0i) as usize * w, (hi_h - lo_h) as usize * w);
            for kw in 0..k_w {
                let kk = kh * k_w + kw;
                let dst = &mut col[(c * k_h * k_w + kk) * cols..][..cols];
                let (above, rest) = dst.split_at_mut(top);
                let (run, below) = rest.split_at_mut(body);
                above.iter_mut().for_each(|x| *x = T::default());
                below.iter_mut().for_each(|x| *x = T::default());
                if run.is_empty() {
                    continue;
                }
                // Element j of the run is input element `first + j` of the plane; the ones
                // before the plane's start or past its end are side padding (zeroed here or
                // below), never read.
                let shift_w = kw as i64 - pad_w;
                let first = (lo_h + shift_h) * w as i64 + shift_w;
                let j0 = (-first).clamp(0, body as i64) as usize;
                let j1 = (plane - first).clamp(j0 as i64, body as i64) as usize;
                run[..j0].iter_mut().for_each(|x| *x = T::default());
                run[j1..].iter_mut().for_each(|x| *x = T::default());
                let src = base.offset((chan + first + j0 as i64) as isize);
                run[j0..j1].copy_from_slice(std::slice::from_raw_parts(src, j1 - j0));
                // Columns whose window starts left of the input or ends right of it.
                let lo_w = (-shift_w).clamp(0, w as i64) as usize;
                let hi_w = (w as i64 - shift_w).clamp(lo_w as i64, w as i64) as usize;
                if lo_w > 0 || hi_w < w {
                    for row in run.chunks_exact_mut(w) {
                        row[..lo_w].iter_mut().for_each(|x| *x = T::default());
                        row[hi_w..].iter_mut().for_each(|x| *x = T::default());
                    }
                }
            }
        }
    }
}

/// A 2-D, undilated convolution over contiguous input channel planes (ResNet's strided 3x3s,
/// 1x1 downsamples and 7x7 stem): [`im2col_2d`] walks the rows with the column bounds of each
/// kernel column computed once, instead of the general path's per-row multi-index.
fn plane_2d(p: &ConvPlan) -> bool {
    let (s, l) = (&p.a_shape, &p.a.1);
    s.len() == 4
        && p.geom.dilation == [1, 1]
        && p.out_shape[3] > 0
        && l.strides[3] == 1
        && (l.strides[2] == s[3] as i64 || s[2] == 1)
}

/// [`im2col`] for the [`plane_2d`] case.
///
/// # Safety
/// As for `run_typed`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn im2col_2d<T: Real + Default>(
    p: &ConvPlan,
    bufs: &Bufs,
    b: usize,
    c0: usize,
    channels: usize,
    r0: usize,
    r1: usize,
    col: &mut [T],
) {
    let (buf, layout) = &p.a;
    let base = bufs.ptr(*buf) as *const T;
    let (h_in, w_in) = (p.a_shape[2] as i64, p.a_shape[3] as i64);
    let width = p.out_shape[3];
    let (k_h, k_w) = (p.w_shape[2], p.w_shape[3]);
    let (s_h, s_w) = (p.geom.stride[0] as i64, p.geom.stride[1]);
    let (pad_h, pad_w) = (p.geom.padding[0] as i64, p.geom.padding[1] as i64);
    let cols = (r1 - r0) * width;
    for c in 0..channels {
        let chan =
            layout.offset + b as i64 * layout.strides[0] + (c0 + c) as i64 * layout.strides[1];
        for kh in 0..k_h {
            for kw in 0..k_w {
                // Output columns whose input column ow * s_w + kw - pad_w is inside the input.
                let shift_w = kw as i64 - pad_w;
                let sw = s_w as i64;
                let lo = if shift_w >= 0 {
                    0
                } else {
                    (-shift_w + sw - 1) / sw
                };
                let hi = if w_in - shift_w <= 0 {
                    0
                } else {
                    (w_in - shift_w + sw - 1) / sw
                };
                let (lo, hi) = (lo.min(width as i64) as usize, hi.min(width as i64) as usize);
                let hi = hi.max(lo);
                let kk = kh * k_w + kw;
                let dst = &mut col[(c * k_h * k_w + kk) * cols..][..cols];
                for (i, row) in dst.chunks_exact_mut(width).enumerate() {
                    let ih = (r0 + i) as i64 * s_h + kh as i64 - pad_h;
                    if ih < 0 || ih >= h_in || lo == hi {
                        row.iter_mut().for_each(|x| *x = T::default());
                        continue;
                    }
                    row[..lo].iter_mut().for_each(|x| *x = T::default());
                    row[hi..].iter_mut().for_each(|x| *x = T::default());
                    // Input elements lo * s_w + shift_w ..= (hi - 1) * s_w + shift_w of row ih,
                    // all inside it.
                    let start = chan + ih * w_in + lo as i64 * sw + shift_w;
                    let n = hi - lo;
                    let src =
                        std::slice::from_raw_parts(base.offset(start as isize), (n - 1) * s_w + 1);
                    let out = &mut row[lo..hi];
                    match s_w {
                        1 => out.copy_from_slice(src),
                        2 => {
                            // Pairs, so the loop vectorises; the last element alone (its odd
                            // neighbour may be past the row).
                            let (body, last) = out.split_at_mut(n - 1);
                            for (slot, pair) in body.iter_mut().zip(src.chunks_exact(2)) {
                                *slot = pair[0];
                            }
                            last[0] = src[2 * (n - 1)];
                        }
                        _ => {
                            for (slot, x) in out.iter_mut().zip(src.iter().step_by(s_w)) {
                                *slot = *x;
                            }
                        }
                    }
                }
            }
        }
    }
}
