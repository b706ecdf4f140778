//! N-d convolution (cross-correlation, as torch): every output element is its bias plus the
//! dot product of the kernel with the input window it sees, accumulated in f64 and rounded
//! once by the caller.

use crate::data::Lanes;
use crate::shape::row_major_strides;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConvGeometry {
    pub(crate) stride: Vec<usize>,
    pub(crate) padding: Vec<usize>,
    pub(crate) dilation: Vec<usize>,
    pub(crate) groups: usize,
}

/// Every multi-index of `shape` in row-major order.
fn multi_indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; shape.len()];
    for _ in 0..n {
        out.push(index.clone());
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

pub(crate) fn convolution(
    a: &Lanes,
    a_shape: &[usize],
    w: &Lanes,
    w_shape: &[usize],
    bias: Option<&Lanes>,
    out_shape: &[usize],
    geom: &ConvGeometry,
) -> Result<Lanes, String> {
    match (a, w, bias) {
        (Lanes::Float(a), Lanes::Float(w), None) => Ok(Lanes::Float(conv(
            a, a_shape, w, w_shape, None, out_shape, geom, 0.0,
        ))),
        (Lanes::Float(a), Lanes::Float(w), Some(Lanes::Float(b))) => Ok(Lanes::Float(conv(
            a,
            a_shape,
            w,
            w_shape,
            Some(b),
            out_shape,
            geom,
            0.0,
        ))),
        (Lanes::Int(a), Lanes::Int(w), None) => Ok(Lanes::Int(conv(
            a, a_shape, w, w_shape, None, out_shape, geom, 0,
        ))),
        (Lanes::Int(a), Lanes::Int(w), Some(Lanes::Int(b))) => Ok(Lanes::Int(conv(
            a,
            a_shape,
            w,
            w_shape,
            Some(b),
            out_shape,
            geom,
            0,
        ))),
        _ => Err("convolution operands must share a float or an integer lane".into()),
    }
}

/// A number a convolution accumulates: f64, or i64 wrapping like a fixed-width kernel.
trait Acc: Copy {
    fn mul_add(self, w: Self, x: Self) -> Self;
}

impl Acc for f64 {
    fn mul_add(self, w: f64, x: f64) -> f64 {
        self + w * x
    }
}

impl Acc for i64 {
    fn mul_add(self, w: i64, x: i64) -> i64 {
        self.wrapping_add(w.wrapping_mul(x))
    }
}

#[allow(clippy::too_many_arguments)]
fn conv<T: Acc>(
    a: &[T],
    a_shape: &[usize],
    w: &[T],
    w_shape: &[usize],
    bias: Option<&[T]>,
    out_shape: &[usize],
    geom: &ConvGeometry,
    zero: T,
) -> Vec<T> {
    let (n, c_in, c_out) = (a_shape[0], a_shape[1], w_shape[0]);
    let (in_sp, k_sp, out_sp) = (&a_shape[2..], &w_shape[2..], &out_shape[2..]);
    let (cin_g, cout_g) = (c_in / geom.groups, c_out / geom.groups);
    let in_strides = row_major_strides(in_sp);
    let (in_size, k_size, out_size): (usize, usize, usize) = (
        in_sp.iter().product(),
        k_sp.iter().product(),
        out_sp.iter().product(),
    );
    // For each (output position, kernel position): the input offset it reads, or None in the
    // zero padding.
    let kernel = multi_indices(k_sp);
    let in_strides = &in_strides;
    let taps: Vec<Option<usize>> = multi_indices(out_sp)
        .iter()
        .flat_map(|o| {
            kernel.iter().map(move |k| {
                let mut off = 0usize;
                for d in 0..o.len() {
                    let pos = (o[d] * geom.stride[d] + k[d] * geom.dilation[d]) as i64
                        - geom.padding[d] as i64;
                    if pos < 0 || pos as usize >= in_sp[d] {
                        return None;
                    }
                    off += pos as usize * in_strides[d];
                }
                Some(off)
            })
        })
        .collect();
    let mut out = vec![zero; n * c_out * out_size];
    for b in 0..n {
        for oc in 0..c_out {
            let g = oc / cout_g;
            let init = bias.map_or(zero, |bias| bias[oc]);
            for o in 0..out_size {
                let mut acc = init;
                for c in 0..cin_g {
                    let a_base = (b * c_in + g * cin_g + c) * in_size;
                    let w_base = (oc * cin_g + c) * k_size;
                    for (k, tap) in taps[o * k_size..(o + 1) * k_size].iter().enumerate() {
                        if let Some(off) = tap {
                            acc = acc.mul_add(w[w_base + k], a[a_base + off]);
                        }
                    }
                }
                out[(b * c_out + oc) * out_size + o] = acc;
            }
        }
    }
    out
}
