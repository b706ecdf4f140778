//! VJP rule of `prims.convolution`: both cotangents are convolutions again.

use super::along_dims::int;
use super::{diff_tensor, ints, v};
use crate::error::{Error, Result};
use crate::ir::Arg;
use crate::prims::{prim1, Prim};
use crate::tensor::Tensor;

fn conv(
    a: &Tensor,
    w: &Tensor,
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    groups: i64,
) -> Result<Tensor> {
    prim1(
        Prim::Convolution,
        vec![
            v(a),
            v(w),
            Arg::None,
            Arg::Ints(stride.to_vec()),
            Arg::Ints(padding.to_vec()),
            Arg::Ints(dilation.to_vec()),
            Arg::Int(groups),
        ],
    )
}

/// `convolution(a, w, bias, stride, padding, dilation, groups)`. Both cotangents are
/// convolutions again:
/// - input: the transposed convolution, i.e. `g` dilated by the stride (interior padding),
///   padded by `dilation * (K - 1) - padding` (plus what the forward's floor division dropped
///   on the high side), convolved with the flipped kernel whose in/out channels are swapped
///   within each group;
/// - weight: `a` and `g` swap the roles of batch and channels (stride and dilation swap too);
///   the groups become `G` blocks of the batch, and the result is cut back to the kernel size;
/// - bias: `g` summed over every dim but the channels.
pub(super) fn convolution(args: &[Arg], g: &Tensor) -> Result<Vec<Option<Tensor>>> {
    let prim = Prim::Convolution;
    let (Some(Arg::Value(av)), Some(Arg::Value(wv))) = (args.first(), args.get(1)) else {
        return Err(Error::Bug(
            "prims.convolution: input or weight is not a tensor".into(),
        ));
    };
    let (a, w) = (
        crate::trace_ctx::tensor_of(*av)?,
        crate::trace_ctx::tensor_of(*wv)?,
    );
    let (stride, padding, dilation) = (
        ints(&args[3], prim)?,
        ints(&args[4], prim)?,
        ints(&args[5], prim)?,
    );
    let groups = int(&args[6], prim)?;
    let spatial = w.rank() - 2;
    let (l, k, o) = (&a.shape()[2..], &w.shape()[2..], &g.shape()[2..]);
    let (n, c_in, c_out) = (a.shape()[0], a.shape()[1], w.shape()[0]);
    let (cin_g, cout_g) = (c_in / groups, c_out / groups);
    let mut cots: Vec<Option<Tensor>> = vec![None; args.len()];

    if diff_tensor(&args[0])?.is_some() {
        let mut config = vec![0i64; 6];
        for d in 0..spatial {
            let low = dilation[d] * (k[d] - 1) - padding[d];
            let covered = (o[d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (k[d] - 1) + 1;
            config.extend([low, low + l[d] - covered, stride[d] - 1]);
        }
        let g_pad = prim1(Prim::Pad, vec![v(g), Arg::Float(0.0), Arg::Ints(config)])?;
        let mut split = vec![groups, cout_g, cin_g];
        split.extend_from_slice(k);
        let mut perm: Vec<i64> = vec![0, 2, 1];
        perm.extend(3..3 + spatial as i64);
        let mut merged = vec![c_in, cout_g];
        merged.extend_from_slice(k);
        let swapped = crate::clang::reshape(
            &crate::clang::transpose(&crate::clang::reshape(&w, split)?, perm)?,
            merged,
        )?;
        let flipped = prim1(
            Prim::Flip,
            vec![v(&swapped), Arg::Ints((2..2 + spatial as i64).collect())],
        )?;
        let ones = vec![1i64; spatial];
        let zeros = vec![0i64; spatial];
        cots[0] = Some(conv(&g_pad, &flipped, &ones, &zeros, &dilation, groups)?);
    }

    if diff_tensor(&args[1])?.is_some() {
        let mut split = vec![n, groups, cin_g];
        split.extend_from_slice(l);
        let mut perm: Vec<i64> = vec![2, 1, 0];
        perm.extend(3..3 + spatial as i64);
        let mut merged = vec![cin_g, groups * n];
        merged.extend_from_slice(l);
        let a2 = crate::clang::reshape(
            &crate::clang::transpose(&crate::clang::reshape(&a, split)?, perm)?,
            merged,
        )?;
        let mut perm: Vec<i64> = vec![1, 0];
        perm.extend(2..2 + spatial as i64);
        let g2 = crate::clang::transpose(g, perm.clone())?;
        let r = conv(&a2, &g2, &dilation, &padding, &stride, groups)?;
        let r = crate::clang::transpose(&r, perm)?;
        let full = r.shape()[2..] == *k;
        cots[1] = Some(if full {
            r
        } else {
            let rank = r.rank();
            let mut end = r.shape().to_vec();
            end[2..].copy_from_slice(k);
            prim1(
                Prim::Slice,
                vec![
                    v(&r),
                    Arg::Ints(vec![0; rank]),
                    Arg::Ints(end),
                    Arg::Ints(vec![1; rank]),
                ],
            )?
        });
    }

    if diff_tensor(&args[2])?.is_some() {
        let dims: Vec<i64> = (0..g.rank() as i64).filter(|&d| d != 1).collect();
        cots[2] = Some(prim1(Prim::Sum, vec![v(g), Arg::Ints(dims)])?);
    }
    Ok(cots)
}
