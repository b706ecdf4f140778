//! Slices (views) and pads (a stage) against naive references written from the prims'
//! definitions: every output index mapped back to its input index.

use super::{assert_close, data, ints, Tb};
use thunder_abi::{ArgView, DTypeCode::F32};

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The multi-index of flat position `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    idx
}

fn naive_pad(a: &[f32], shape: &[usize], value: f32, config: &[(i64, i64, i64)]) -> Vec<f64> {
    let out_shape: Vec<usize> = shape
        .iter()
        .zip(config)
        .map(|(&n, &(lo, hi, int))| {
            (lo + hi + n as i64 + (n as i64 - 1).max(0) * int).max(0) as usize
        })
        .collect();
    let st = strides(shape);
    (0..out_shape.iter().product::<usize>())
        .map(|flat| {
            let o = unravel(flat, &out_shape);
            let mut src = 0usize;
            for d in 0..shape.len() {
                let (lo, _, int) = config[d];
                let rel = o[d] as i64 - lo;
                if rel < 0 || rel % (int + 1) != 0 || rel / (int + 1) >= shape[d] as i64 {
                    return value as f64;
                }
                src += (rel / (int + 1)) as usize * st[d];
            }
            a[src] as f64
        })
        .collect()
}

fn pad_case(shape: &[usize], value: f64, config: &[(i64, i64, i64)]) {
    let mut t = Tb::default();
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let a = t.value(F32, &dims);
    let out_shape: Vec<i64> = shape
        .iter()
        .zip(config)
        .map(|(&n, &(lo, hi, int))| lo + hi + n as i64 + (n as i64 - 1).max(0) * int)
        .collect();
    let flat: Vec<i64> = config.iter().flat_map(|&(l, h, i)| [l, h, i]).collect();
    let p = t.op(
        "pad",
        vec![ArgView::Value(a), ArgView::Float(value), ints(&flat)],
        F32,
        &out_shape,
    );
    // A consumer in a fused loop, so the pad's buffer is read back by a group.
    let y = t.op(
        "mul",
        vec![ArgView::Value(p), ArgView::Float(2.0)],
        F32,
        &out_shape,
    );
    let da = data(shape.iter().product(), 7);
    let got = t.run(&[(a, da.clone())], &[p, y]);
    let want = naive_pad(&da, shape, value as f32, config);
    let what = format!("pad {shape:?} {config:?}");
    assert_close(&got[0], &want, 0.0, 0.0, &what);
    let twice: Vec<f64> = want.iter().map(|w| 2.0 * w).collect();
    assert_close(&got[1], &twice, 0.0, 0.0, &what);
}

#[test]
fn pad_matches_naive() {
    pad_case(&[3, 4], 0.0, &[(1, 2, 0), (0, 3, 0)]);
    pad_case(&[2, 3, 5], -1.5, &[(0, 0, 0), (2, 0, 0), (1, 1, 0)]);
    // Negative low/high crop; interior padding spreads the elements.
    pad_case(&[4, 6], 0.25, &[(-1, 2, 0), (1, -2, 1)]);
    pad_case(&[5], 0.0, &[(-2, -3, 0)]);
    pad_case(&[3, 2], 9.0, &[(0, 0, 2), (3, 0, 0)]);
    // 0-d input, an empty input dim, and an empty output.
    pad_case(&[], 1.0, &[]);
    pad_case(&[0], 3.0, &[(2, 1, 0)]);
    pad_case(&[2, 0], 3.0, &[(1, 0, 0), (0, 2, 0)]);
    pad_case(&[3], 3.0, &[(-3, 0, 0)]);
    // Outputs past `PAR_PAD` elements (rows split over the threads): a max pool's
    // border, a crop with interior padding, rows that land nowhere in an outer dim.
    pad_case(
        &[2, 8, 60, 60],
        -1e30,
        &[(0, 0, 0), (0, 0, 0), (1, 1, 0), (1, 1, 0)],
    );
    pad_case(&[3, 70, 150], 0.5, &[(1, -1, 0), (-2, 3, 1), (2, 1, 0)]);
    pad_case(&[4, 40, 130], -2.0, &[(3, 2, 0), (0, 0, 0), (0, -5, 2)]);
    // The GPT-2 block's qkv gradient part: three times `PAR_PAD` elements, four chunks.
    pad_case(
        &[2, 128, 4, 64],
        0.0,
        &[(0, 0, 0), (0, 0, 0), (4, 4, 0), (0, 0, 0)],
    );
    // Fewer rows than chunks.
    pad_case(&[1, 70000], 1.0, &[(1, 0, 0), (0, 3, 0)]);
}

/// The qkv split and its backward: three slices of the last dim feed a GEMM and a fused loop;
/// three pads of their gradients are added back together.
#[test]
fn split_and_its_gradient_as_slices_and_pads() {
    let (b, t_, c) = (2usize, 5usize, 4usize);
    let mut t = Tb::default();
    let qkv = t.value(F32, &[b as i64, t_ as i64, 3 * c as i64]);
    let w = t.value(F32, &[c as i64, 3]);
    let part = |t: &mut Tb, j: usize| {
        t.op(
            "slice",
            vec![
                ArgView::Value(qkv),
                ints(&[0, 0, (j * c) as i64]),
                ints(&[b as i64, t_ as i64, ((j + 1) * c) as i64]),
                ints(&[1, 1, 1]),
            ],
            F32,
            &[b as i64, t_ as i64, c as i64],
        )
    };
    let (q, k, v) = (part(&mut t, 0), part(&mut t, 1), part(&mut t, 2));
    let wb = t.op(
        "broadcast_in_dim",
        vec![
            ArgView::Value(w),
            ints(&[b as i64, c as i64, 3]),
            ints(&[1, 2]),
        ],
        F32,
        &[b as i64, c as i64, 3],
    );
    let qw = t.op(
        "matmul",
        vec![ArgView::Value(q), ArgView::Value(wb)],
        F32,
        &[b as i64, t_ as i64, 3],
    );
    let kv = t.op(
        "mul",
        vec![ArgView::Value(k), ArgView::Value(v)],
        F32,
        &[b as i64, t_ as i64, c as i64],
    );
    let full = [b as i64, t_ as i64, 3 * c as i64];
    let pad = |t: &mut Tb, x: u32, j: usize| {
        let (lo, hi) = ((j * c) as i64, ((2 - j) * c) as i64);
        t.op(
            "pad",
            vec![
                ArgView::Value(x),
                ArgView::Float(0.0),
                ints(&[0, 0, 0, 0, 0, 0, lo, hi, 0]),
            ],
            F32,
            &full,
        )
    };
    let (pq, pk, pv) = (pad(&mut t, q, 0), pad(&mut t, kv, 1), pad(&mut t, v, 2));
    let s1 = t.op(
        "add",
        vec![ArgView::Value(pq), ArgView::Value(pk)],
        F32,
        &full,
    );
    let s2 = t.op(
        "add",
        vec![ArgView::Value(s1), ArgView::Value(pv)],
        F32,
        &full,
    );
    let (dx, dw) = (data(b * t_ * 3 * c, 3), data(c * 3, 4));
    let got = t.run(&[(qkv, dx.clone()), (w, dw.clone())], &[qw, s2]);
    let at = |bi: usize, ti: usize, j: usize| dx[(bi * t_ + ti) * 3 * c + j] as f64;
    let mut want_qw = vec![0.0; b * t_ * 3];
    let mut want_s = vec![0.0; b * t_ * 3 * c];
    for bi in 0..b {
        for ti in 0..t_ {
            for n in 0..3 {
                want_qw[(bi * t_ + ti) * 3 + n] =
                    (0..c).map(|p| at(bi, ti, p) * dw[p * 3 + n] as f64).sum();
            }
            for j in 0..3 * c {
                let x = at(bi, ti, j);
                want_s[(bi * t_ + ti) * 3 * c + j] = if (c..2 * c).contains(&j) {
                    (x as f32 * at(bi, ti, j + c) as f32) as f64
                } else {
                    x
                };
            }
        }
    }
    assert_close(&got[0], &want_qw, 1e-5, 1e-6, "q @ w");
    assert_close(&got[1], &want_s, 0.0, 0.0, "pads added");
}

/// A strided slice (every other row, a window of columns) read by a fused loop and as a
/// region output.
#[test]
fn stepped_slice_is_a_view() {
    let mut t = Tb::default();
    let a = t.value(F32, &[7, 6]);
    let s = t.op(
        "slice",
        vec![
            ArgView::Value(a),
            ints(&[1, 2]),
            ints(&[7, 5]),
            ints(&[2, 1]),
        ],
        F32,
        &[3, 3],
    );
    let e = t.op("neg", vec![ArgView::Value(s)], F32, &[3, 3]);
    let da = data(42, 9);
    let got = t.run(&[(a, da.clone())], &[s, e]);
    let want: Vec<f64> = [1usize, 3, 5]
        .iter()
        .flat_map(|&r| (2..5).map(move |col| (r, col)))
        .map(|(r, col)| da[r * 6 + col] as f64)
        .collect();
    assert_close(&got[0], &want, 0.0, 0.0, "slice");
    let neg: Vec<f64> = want.iter().map(|w| -w).collect();
    assert_close(&got[1], &neg, 0.0, 0.0, "neg of slice");
}

/// `iota(len, start, step)` as i64 indices.
fn iota(t: &mut Tb, len: i64, start: i64, step: i64) -> u32 {
    t.op(
        "iota",
        vec![
            ArgView::Int(len),
            ArgView::Int(start),
            ArgView::Int(step),
            ArgView::Device(thunder_abi::DeviceDesc::CPU),
            ArgView::DType(thunder_abi::DTypeCode::I64),
        ],
        thunder_abi::DTypeCode::I64,
        &[len],
    )
}

/// `take(a, index, dim)` against the definition, on a contiguous and a transposed source,
/// with repeated and descending indices.
#[test]
fn take_gathers_rows_of_one_dim() {
    // Rows 5, 4, 3, 2 of a [6, 5] table (an embedding lookup).
    let mut t = Tb::default();
    let a = t.value(F32, &[6, 5]);
    let idx = iota(&mut t, 4, 5, -1);
    let g = t.op(
        "take",
        vec![ArgView::Value(a), ArgView::Value(idx), ArgView::Int(0)],
        F32,
        &[4, 5],
    );
    let da = data(30, 1);
    let got = t.run(&[(a, da.clone())], &[g]);
    let want: Vec<f64> = [5usize, 4, 3, 2]
        .iter()
        .flat_map(|&r| da[r * 5..r * 5 + 5].iter().map(|&x| x as f64))
        .collect();
    assert_close(&got[0], &want, 0.0, 0.0, "take dim 0");

    // Dim 1 (rows 1, 3, 5) of a transposed [2, 6, 3] view of a [2, 3, 6] input, and dim 2
    // with one index repeated five times.
    let mut t = Tb::default();
    let a = t.value(F32, &[2, 3, 6]);
    let at = t.op(
        "transpose",
        vec![ArgView::Value(a), ints(&[0, 2, 1])],
        F32,
        &[2, 6, 3],
    );
    let i1 = iota(&mut t, 3, 1, 2);
    let g1 = t.op(
        "take",
        vec![ArgView::Value(at), ArgView::Value(i1), ArgView::Int(1)],
        F32,
        &[2, 3, 3],
    );
    let i2 = iota(&mut t, 5, 2, 0);
    let g2 = t.op(
        "take",
        vec![ArgView::Value(at), ArgView::Value(i2), ArgView::Int(2)],
        F32,
        &[2, 6, 5],
    );
    let da = data(36, 2);
    let got = t.run(&[(a, da.clone())], &[g1, g2]);
    // at[b][i][j] = a[b][j][i]
    let at_ = |b: usize, i: usize, j: usize| da[(b * 3 + j) * 6 + i] as f64;
    let want1: Vec<f64> = (0..2)
        .flat_map(|b| [1usize, 3, 5].map(move |r| (b, r)))
        .flat_map(|(b, r)| (0..3).map(move |j| at_(b, r, j)))
        .collect();
    assert_close(&got[0], &want1, 0.0, 0.0, "take dim 1 of a transpose");
    let want2: Vec<f64> = (0..2)
        .flat_map(|b| (0..6).map(move |i| (b, i)))
        .flat_map(|(b, i)| (0..5).map(move |_| at_(b, i, 2)))
        .collect();
    assert_close(&got[1], &want2, 0.0, 0.0, "take dim 2, one index repeated");
}

#[test]
fn take_refuses_an_index_out_of_range() {
    for start in [6, -1] {
        let mut t = Tb::default();
        let a = t.value(F32, &[6, 2]);
        let idx = iota(&mut t, 2, start, 0);
        let g = t.op(
            "take",
            vec![ArgView::Value(a), ArgView::Value(idx), ArgView::Int(0)],
            F32,
            &[2, 2],
        );
        let err = t
            .try_run(&[(a, data(12, 3))], &[g])
            .expect_err("an index out of range");
        let text = format!("{err:?}");
        assert!(
            text.contains("prims.take")
                && text.contains(&format!(
                    "index {start} is out of bounds for dim 0 with size 6"
                )),
            "{text}"
        );
    }
}

/// `cat(dim, parts...)` against the definition: output index `o` along `dim` reads the part
/// whose range holds it. One part is made by a fused loop (pending, then materialized), one is
/// a transposed view (strided reads), and a consumer reads the cat back in a fused loop.
fn cat_case(shapes: &[Vec<usize>], dim: usize) {
    let mut t = Tb::default();
    let mut parts = Vec::new();
    let mut inputs = Vec::new();
    let mut host: Vec<Vec<f32>> = Vec::new();
    for (j, shape) in shapes.iter().enumerate() {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let n: usize = shape.iter().product();
        let da = data(n, 11 + j as u64);
        let part = match j % 3 {
            // A fused loop's result.
            0 => {
                let a = t.value(F32, &dims);
                inputs.push((a, da.clone()));
                host.push(da.iter().map(|x| x * 2.0).collect());
                t.op(
                    "mul",
                    vec![ArgView::Value(a), ArgView::Float(2.0)],
                    F32,
                    &dims,
                )
            }
            // A transpose of the last two dims (a strided view), for rank >= 2.
            1 if shape.len() >= 2 => {
                let r = shape.len();
                let mut src_dims = dims.clone();
                src_dims.swap(r - 2, r - 1);
                let a = t.value(F32, &src_dims);
                let src_shape: Vec<usize> = src_dims.iter().map(|&d| d as usize).collect();
                // The part's element at index i reads the source at i with the last two swapped.
                let st = strides(&src_shape);
                let part: Vec<f32> = (0..n)
                    .map(|flat| {
                        let mut i = unravel(flat, shape);
                        i.swap(r - 2, r - 1);
                        da[i.iter().zip(&st).map(|(a, b)| a * b).sum::<usize>()]
                    })
                    .collect();
                inputs.push((a, da.clone()));
                host.push(part);
                let mut perm: Vec<i64> = (0..r as i64).collect();
                perm.swap(r - 2, r - 1);
                t.op(
                    "transpose",
                    vec![ArgView::Value(a), ints(&perm)],
                    F32,
                    &dims,
                )
            }
            _ => {
                let a = t.value(F32, &dims);
                inputs.push((a, da.clone()));
                host.push(da);
                a
            }
        };
        parts.push(part);
    }
    let mut out_shape = shapes[0].clone();
    out_shape[dim] = shapes.iter().map(|s| s[dim]).sum();
    let out_dims: Vec<i64> = out_shape.iter().map(|&d| d as i64).collect();
    let mut args = vec![ArgView::Int(dim as i64)];
    args.extend(parts.iter().map(|&p| ArgView::Value(p)));
    let c = t.op("cat", args, F32, &out_dims);
    let y = t.op(
        "add",
        vec![ArgView::Value(c), ArgView::Float(1.0)],
        F32,
        &out_dims,
    );
    let got = t.run(&inputs, &[c, y]);
    let want: Vec<f64> = (0..out_shape.iter().product::<usize>())
        .map(|flat| {
            let mut o = unravel(flat, &out_shape);
            let mut j = 0;
            while o[dim] >= shapes[j][dim] {
                o[dim] -= shapes[j][dim];
                j += 1;
            }
            let st = strides(&shapes[j]);
            host[j][o.iter().zip(&st).map(|(a, b)| a * b).sum::<usize>()] as f64
        })
        .collect();
    let what = format!("cat {shapes:?} dim {dim}");
    assert_close(&got[0], &want, 0.0, 0.0, &what);
    let plus: Vec<f64> = want.iter().map(|w| w + 1.0).collect();
    assert_close(&got[1], &plus, 0.0, 0.0, &what);
}

#[test]
fn cat_matches_the_definition() {
    // split's gradient: three [B, T, C] pieces along the last dim.
    cat_case(&[vec![2, 5, 4], vec![2, 5, 4], vec![2, 5, 4]], 2);
    cat_case(&[vec![3, 2], vec![1, 2], vec![4, 2]], 0);
    cat_case(&[vec![2, 3, 4], vec![2, 1, 4]], 1);
    // One part, an empty part, and 1-D parts.
    cat_case(&[vec![3, 4]], 1);
    cat_case(&[vec![2, 0], vec![2, 3], vec![2, 0]], 1);
    cat_case(&[vec![5], vec![0], vec![2]], 0);
    // Large enough to split the rows over the threads.
    cat_case(&[vec![2, 40, 300], vec![2, 40, 500]], 2);
    cat_case(&[vec![2, 300, 120], vec![2, 260, 120]], 1);
}

/// A head transpose `[B, T, H, D] -> [B, H, T, D]` materialized by a group that only copies
/// (`row_copy.rs`: one `memcpy` per row of D), against the index map; small enough for one
/// thread, and large enough to split its rows between threads.
#[test]
fn head_transposes_copy_whole_rows() {
    for shape in [
        [2usize, 3, 4, 8],
        [2, 128, 4, 64],
        [4, 128, 8, 64],
        [1, 5, 1, 1],
    ] {
        let mut t = Tb::default();
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let out_dims = [dims[0], dims[2], dims[1], dims[3]];
        let a = t.value(F32, &dims);
        let y = t.op(
            "transpose",
            vec![ArgView::Value(a), ints(&[0, 2, 1, 3])],
            F32,
            &out_dims,
        );
        let da = data(shape.iter().product(), 11);
        let got = t.run(&[(a, da.clone())], &[y]);
        let out_shape = [shape[0], shape[2], shape[1], shape[3]];
        let st = strides(&shape);
        let want: Vec<f64> = (0..da.len())
            .map(|flat| {
                let o = unravel(flat, &out_shape);
                da[o[0] * st[0] + o[2] * st[1] + o[1] * st[2] + o[3] * st[3]] as f64
            })
            .collect();
        assert_close(&got[0], &want, 0.0, 0.0, &format!("transpose {shape:?}"));
    }
}

/// A 3x3 max pool with stride 2 as ONNX import writes it: a -1e30 border (pad), nine
/// slices stepping by two in both spatial dims, and a chain of maximums. The fused loop reads
/// every slice with an inner stride of two (rows of 35 and 36 elements, odd tails included),
/// against the window maximum computed directly.
#[test]
fn strided_slices_pool_a_window() {
    let (c, h, w) = (3usize, 40usize, 71usize);
    let (oh, ow) = ((h + 2 - 3) / 2 + 1, (w + 2 - 3) / 2 + 1);
    let mut t = Tb::default();
    let a = t.value(F32, &[c as i64, h as i64, w as i64]);
    let (hp, wp) = (h as i64 + 2, w as i64 + 2);
    let p = t.op(
        "pad",
        vec![
            ArgView::Value(a),
            ArgView::Float(-1e30),
            ints(&[0, 0, 0, 1, 1, 0, 1, 1, 0]),
        ],
        F32,
        &[c as i64, hp, wp],
    );
    let out = [c as i64, oh as i64, ow as i64];
    let mut acc = None;
    for (di, dj) in (0..3).flat_map(|i| (0..3).map(move |j| (i, j))) {
        let s = t.op(
            "slice",
            vec![
                ArgView::Value(p),
                ints(&[0, di, dj]),
                ints(&[
                    c as i64,
                    di + 2 * (oh as i64 - 1) + 1,
                    dj + 2 * (ow as i64 - 1) + 1,
                ]),
                ints(&[1, 2, 2]),
            ],
            F32,
            &out,
        );
        acc = Some(match acc {
            None => s,
            Some(m) => t.op(
                "maximum",
                vec![ArgView::Value(m), ArgView::Value(s)],
                F32,
                &out,
            ),
        });
    }
    let y = acc.expect("nine slices");
    let da = data(c * h * w, 11);
    let got = t.run(&[(a, da.clone())], &[y]).remove(0);
    let mut want = Vec::new();
    for ch in 0..c {
        for i in 0..oh {
            for j in 0..ow {
                let mut m = f32::NEG_INFINITY;
                for di in 0..3 {
                    for dj in 0..3 {
                        let (y, x) = ((2 * i + di) as i64 - 1, (2 * j + dj) as i64 - 1);
                        if y >= 0 && x >= 0 && (y as usize) < h && (x as usize) < w {
                            m = m.max(da[(ch * h + y as usize) * w + x as usize]);
                        }
                    }
                }
                want.push(m as f64);
            }
        }
    }
    assert_close(&got, &want, 0.0, 0.0, "3x3 stride-2 max pool");
}
