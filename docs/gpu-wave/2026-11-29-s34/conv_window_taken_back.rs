//! A stride-1 2-D convolution's column panels gathered straight from its input: each panel
//! row (16 output positions at one input channel and kernel tap) is one or a few masked
//! vector loads of the input rows those positions' windows cover, the padding the masked-off
//! lanes.
//!
//! `conv_run`'s `Unrolled` packs a block by unrolling each channel into a column buffer
//! (`im2col`: a copy per output row, zero fills at the borders) and then copying each of its
//! rows into the panels: two passes over every column element, and a `memmove` call per
//! output row. In `perf` of ResNet-50's 3x3 classes (one thread, AMD EPYC Zen 3) those were
//! 13-14% of the samples, beside the 6 x 16 tile's 82%.

use crate::conv::ConvPlan;
use crate::exec::Bufs;
use crate::packed_left::Columns;
use crate::prepack::NR;

/// The columns of one block of whole output rows (`r0..`) of batch item `b`, input channels
/// from `c0`, of a convolution [`Windowed::of`] accepts.
pub(crate) struct Windowed {
    /// Input channel `c0` of batch item `b`.
    base: *const f32,
    chan_stride: isize,
    h_in: i64,
    w_in: i64,
    /// The output's width.
    width: usize,
    k_h: usize,
    k_w: usize,
    pad_h: i64,
    pad_w: i64,
    r0: usize,
}

/// Whether the panels of `p`'s blocks are gathered here (`THUNDER_CPU_SIMD_CONV_WINDOW=0`
/// leaves them to `Unrolled`, for A/B runs): f32, 2-D, stride and dilation 1, each input row
/// contiguous and the rows of a channel one run.
pub(crate) fn applies(p: &ConvPlan) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let (s, l) = (&p.a_shape, &p.a.1);
    p.ty == crate::decode::Ty::F32
        && s.len() == 4
        && p.geom.stride == [1, 1]
        && p.geom.dilation == [1, 1]
        && l.strides[3] == 1
        && (l.strides[2] == s[3] as i64 || s[2] == 1)
        && crate::switches::on("THUNDER_CPU_SIMD_CONV_WINDOW", &ON)
}

impl Windowed {
    /// The block of output rows from `r0` of batch item `b`, input channels from `c0`.
    ///
    /// # Safety
    /// [`applies`] holds for `p`; `bufs` holds its input.
    pub(crate) unsafe fn of(p: &ConvPlan, bufs: &Bufs, b: usize, c0: usize, r0: usize) -> Self {
        let (buf, layout) = &p.a;
        let first = layout.offset + b as i64 * layout.strides[0] + c0 as i64 * layout.strides[1];
        Windowed {
            base: (bufs.ptr(*buf) as *const f32).wrapping_offset(first as isize),
            chan_stride: layout.strides[1] as isize,
            h_in: p.a_shape[2] as i64,
            w_in: p.a_shape[3] as i64,
            width: p.out_shape[3],
            k_h: p.w_shape[2],
            k_w: p.w_shape[3],
            pad_h: p.geom.padding[0] as i64,
            pad_w: p.geom.padding[1] as i64,
            r0,
        }
    }
}

/// The lanes of a panel row that read one input row: the offset of lane 0's element from its
/// channel's first, and the masks of the lanes (0-7, 8-15) that read it.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Run {
    offset: isize,
    masks: [std::arch::x86_64::__m256i; 2],
    /// Per half: every lane reads (a plain load), or some do (a masked load), or none.
    whole: [bool; 2],
    some: [bool; 2],
}

#[cfg(target_arch = "x86_64")]
impl Columns for Windowed {
    unsafe fn pack(&self, p0: usize, kc: usize, n: usize, out: &mut [f32]) {
        // SAFETY: forwarded; the packed path runs only where AVX2 is (`prepack::enabled`).
        unsafe { self.pack_avx2(p0, kc, n, out) }
    }
}

impl Windowed {
    /// [`Columns::pack`]: depth `p0..p0 + kc` is whole channels (`packed_left::depth_block`),
    /// depth index `channel * taps + kh * k_w + kw`.
    ///
    /// # Safety
    /// AVX2 is present; the block's input channels and rows are readable.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn pack_avx2(&self, p0: usize, kc: usize, n: usize, out: &mut [f32]) {
        use std::arch::x86_64::*;
        let taps = (self.k_h * self.k_w).max(1);
        let (c_first, channels) = (p0 / taps, kc / taps);
        let width = self.width.max(1);
        let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let lanes_hi = _mm256_add_epi32(lane, _mm256_set1_epi32(8));
        // One output row's run at most per panel lane (a map one position wide), plus one.
        let mut runs = [Run {
            offset: 0,
            masks: [_mm256_setzero_si256(); 2],
            whole: [false; 2],
            some: [false; 2],
        }; NR + 1];
        for (panel, chunk) in out.chunks_exact_mut(NR * kc).enumerate() {
            let j0 = panel * NR;
            let lanes = NR.min(n - j0);
            for kh in 0..self.k_h {
                for kw in 0..self.k_w {
                    // This tap's runs: the panel's lanes split by output row, each clipped to
                    // the input's columns, rows outside the input left out (zero).
                    let mut count = 0;
                    let mut l = 0;
                    while l < lanes {
                        let j = j0 + l;
                        let (oh, ow) = (self.r0 + j / width, j % width);
                        let end = (l + width - ow).min(lanes);
                        let ih = oh as i64 + kh as i64 - self.pad_h;
                        // Input column of lane x: x + off.
                        let off = ow as i64 - l as i64 + kw as i64 - self.pad_w;
                        let lo = (l as i64).max(-off);
                        let hi = (end as i64).min(self.w_in - off);
                        if (0..self.h_in).contains(&ih) && lo < hi {
                            let whole = [lo <= 0 && hi >= 8, lo <= 8 && hi >= 16];
                            let some = [lo < 8, hi > 8];
                            let (lo, hi) =
                                (_mm256_set1_epi32(lo as i32), _mm256_set1_epi32(hi as i32));
                            // Lanes x with lo <= x < hi.
                            let inside = |x: __m256i| {
                                _mm256_andnot_si256(
                                    _mm256_cmpgt_epi32(lo, x),
                                    _mm256_cmpgt_epi32(hi, x),
                                )
                            };
                            runs[count] = Run {
                                offset: (ih * self.w_in + off) as isize,
                                masks: [inside(lane), inside(lanes_hi)],
                                whole,
                                some,
                            };
                            count += 1;
                        }
                        l = end;
                    }
                    let tap = kh * self.k_w + kw;
                    for c in 0..channels {
                        let chan = self
                            .base
                            .wrapping_offset((c_first + c) as isize * self.chan_stride);
                        let (mut v0, mut v1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                        for run in &runs[..count] {
                            let src = chan.wrapping_offset(run.offset);
                            // SAFETY: the loaded (or unmasked) lanes are the run's input
                            // elements, inside the input; masked-off lanes are not read and do
                            // not fault. A whole half is the only run with lanes there.
                            // Masked loads only where a half is partly inside: on Zen 3 a
                            // masked load for every half made the packing as slow as
                            // unrolling and copying.
                            unsafe {
                                if run.whole[0] {
                                    v0 = _mm256_loadu_ps(src);
                                } else if run.some[0] {
                                    v0 = _mm256_or_ps(v0, _mm256_maskload_ps(src, run.masks[0]));
                                }
                                let src = src.wrapping_add(8);
                                if run.whole[1] {
                                    v1 = _mm256_loadu_ps(src);
                                } else if run.some[1] {
                                    v1 = _mm256_or_ps(v1, _mm256_maskload_ps(src, run.masks[1]));
                                }
                            }
                        }
                        let row = &mut chunk[(c * taps + tap) * NR..][..NR];
                        // SAFETY: `row` holds NR floats.
                        unsafe {
                            _mm256_storeu_ps(row.as_mut_ptr(), v0);
                            _mm256_storeu_ps(row.as_mut_ptr().add(8), v1);
                        }
                    }
                }
            }
        }
    }
}
