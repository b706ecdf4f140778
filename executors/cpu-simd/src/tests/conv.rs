//! `prims.convolution` (im2col blocks and GEMM, and the fused residual/ReLU epilogue) against a
//! naive f64 convolution written from the definition: every output is the bias plus the sum
//! over the group's input channels and kernel taps that land inside the input.

use super::{assert_close, data, ints, services, Tb};
use crate::region::Region;
use thunder_abi::export::CompiledRegion;
use thunder_abi::{ArgView, DTypeCode::F32, RegionSpec};

/// One convolution: `[n, c_in, *spatial]` input, `[c_out, c_in/groups, *kernel]` weights.
#[derive(Clone)]
struct Case {
    n: usize,
    c_in: usize,
    c_out: usize,
    spatial: Vec<usize>,
    kernel: Vec<usize>,
    stride: Vec<usize>,
    pad: Vec<usize>,
    dil: Vec<usize>,
    groups: usize,
    bias: bool,
    /// The weights given as `[C_in/G, *K, C_out]` and transposed in the region (a view).
    channels_last_weights: bool,
    /// The input given with its dimensions in this order (`stored[i] = logical[perm[i]]`)
    /// and transposed in the region (a view), or in its own order.
    input_order: Option<Vec<usize>>,
}

fn case(n: usize, c_in: usize, c_out: usize, spatial: &[usize], kernel: &[usize]) -> Case {
    let r = spatial.len();
    Case {
        n,
        c_in,
        c_out,
        spatial: spatial.to_vec(),
        kernel: kernel.to_vec(),
        stride: vec![1; r],
        pad: vec![0; r],
        dil: vec![1; r],
        groups: 1,
        bias: true,
        channels_last_weights: false,
        input_order: None,
    }
}

impl Case {
    fn stride(mut self, s: &[usize]) -> Case {
        self.stride = s.to_vec();
        self
    }
    fn pad(mut self, p: &[usize]) -> Case {
        self.pad = p.to_vec();
        self
    }
    fn dil(mut self, d: &[usize]) -> Case {
        self.dil = d.to_vec();
        self
    }
    fn groups(mut self, g: usize) -> Case {
        self.groups = g;
        self
    }
    fn channels_last_weights(mut self) -> Case {
        self.channels_last_weights = true;
        self
    }
    fn input_order(mut self, perm: &[usize]) -> Case {
        self.input_order = Some(perm.to_vec());
        self
    }
    fn no_bias(mut self) -> Case {
        self.bias = false;
        self
    }

    fn out_spatial(&self) -> Vec<usize> {
        (0..self.spatial.len())
            .map(|d| {
                let span = self.dil[d] * (self.kernel[d] - 1) + 1;
                (self.spatial[d] + 2 * self.pad[d] - span) / self.stride[d] + 1
            })
            .collect()
    }

    fn out_shape(&self) -> Vec<usize> {
        let mut s = vec![self.n, self.c_out];
        s.extend(self.out_spatial());
        s
    }

    /// The naive f64 result.
    fn naive(&self, x: &[f32], w: &[f32], b: &[f32]) -> Vec<f64> {
        let os = self.out_spatial();
        let (s_in, s_out): (usize, usize) = (self.spatial.iter().product(), os.iter().product());
        let k: usize = self.kernel.iter().product();
        let (cg_in, cg_out) = (self.c_in / self.groups, self.c_out / self.groups);
        let r = self.spatial.len();
        let mut out = vec![0.0f64; self.n * self.c_out * s_out];
        for bi in 0..self.n {
            for oc in 0..self.c_out {
                let g = oc / cg_out;
                for so in 0..s_out {
                    let mut acc = if self.bias { b[oc] as f64 } else { 0.0 };
                    let o = unravel(so, &os);
                    for ci in 0..cg_in {
                        for kk in 0..k {
                            let kidx = unravel(kk, &self.kernel);
                            let mut flat = 0usize;
                            let mut inside = true;
                            for d in 0..r {
                                let pos = (o[d] * self.stride[d] + kidx[d] * self.dil[d]) as i64
                                    - self.pad[d] as i64;
                                inside &= pos >= 0 && pos < self.spatial[d] as i64;
                                flat = flat * self.spatial[d] + pos.max(0) as usize;
                            }
                            if inside {
                                let xv = x[(bi * self.c_in + g * cg_in + ci) * s_in + flat];
                                let wv = w[(oc * cg_in + ci) * k + kk];
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                    out[(bi * self.c_out + oc) * s_out + so] = acc;
                }
            }
        }
        out
    }
}

fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    idx
}

fn dims(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}

/// What follows the convolution in the region.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Tail {
    None,
    Relu,
    /// `relu(conv + residual)`, the residual an input of the region.
    AddRelu,
    /// `conv + residual` with the convolution's result also a region output (no fusion).
    AddKeepConv,
}

fn check(c: &Case, tail: Tail) {
    let mut tb = Tb::default();
    let mut xs = vec![c.n, c.c_in];
    xs.extend(&c.spatial);
    let mut ws = vec![c.c_out, c.c_in / c.groups];
    ws.extend(&c.kernel);
    let os = c.out_shape();
    let (x_in, x) = match &c.input_order {
        Some(perm) => {
            let stored: Vec<usize> = perm.iter().map(|&d| xs[d]).collect();
            let x_in = tb.value(F32, &dims(&stored));
            let back: Vec<i64> = (0..perm.len())
                .map(|d| perm.iter().position(|&p| p == d).expect("a permutation") as i64)
                .collect();
            let x = tb.op(
                "transpose",
                vec![ArgView::Value(x_in), ints(&back)],
                F32,
                &dims(&xs),
            );
            (x_in, x)
        }
        None => {
            let x = tb.value(F32, &dims(&xs));
            (x, x)
        }
    };
    // Channels-last weights: `[C_in/G, *K, C_out]`, and the permutation back to `ws`'s order.
    let mut ws_stored = ws[1..].to_vec();
    ws_stored.push(c.c_out);
    let r = ws.len() as i64;
    let back: Vec<i64> = std::iter::once(r - 1).chain(0..r - 1).collect();
    let w_in = if c.channels_last_weights {
        tb.value(F32, &dims(&ws_stored))
    } else {
        tb.value(F32, &dims(&ws))
    };
    let w = if c.channels_last_weights {
        tb.op(
            "transpose",
            vec![ArgView::Value(w_in), ints(&back)],
            F32,
            &dims(&ws),
        )
    } else {
        w_in
    };
    let b = tb.value(F32, &[c.c_out as i64]);
    let res = tb.value(F32, &dims(&os));
    let conv = tb.op(
        "convolution",
        vec![
            ArgView::Value(x),
            ArgView::Value(w),
            if c.bias {
                ArgView::Value(b)
            } else {
                ArgView::None
            },
            ints(&dims(&c.stride)),
            ints(&dims(&c.pad)),
            ints(&dims(&c.dil)),
            ArgView::Int(c.groups as i64),
        ],
        F32,
        &dims(&os),
    );
    let relu = |tb: &mut Tb, v: u32| {
        tb.op(
            "maximum",
            vec![ArgView::Value(v), ArgView::Float(0.0)],
            F32,
            &dims(&os),
        )
    };
    let add = |tb: &mut Tb, v: u32| {
        tb.op(
            "add",
            vec![ArgView::Value(res), ArgView::Value(v)],
            F32,
            &dims(&os),
        )
    };
    let outs = match tail {
        Tail::None => vec![conv],
        Tail::Relu => vec![relu(&mut tb, conv)],
        Tail::AddRelu => {
            let s = add(&mut tb, conv);
            vec![relu(&mut tb, s)]
        }
        Tail::AddKeepConv => {
            let s = add(&mut tb, conv);
            vec![s, conv]
        }
    };
    let n = |v: &[usize]| v.iter().product::<usize>();
    let (dx, dw, db, dr) = (
        data(n(&xs), 1),
        data(n(&ws), 2),
        data(c.c_out, 3),
        data(n(&os), 4),
    );
    // The weights as stored, and in `ws`'s order for the reference.
    let (dw_in, dw) = if c.channels_last_weights {
        let per_out = n(&ws[1..]);
        let mut oihw = vec![0f32; dw.len()];
        for (i, &v) in dw.iter().enumerate() {
            let (rest, o) = (i / c.c_out, i % c.c_out);
            oihw[o * per_out + rest] = v;
        }
        (dw, oihw)
    } else {
        (dw.clone(), dw)
    };
    // The input as stored.
    let dx_in = match &c.input_order {
        Some(perm) => {
            let stored: Vec<usize> = perm.iter().map(|&d| xs[d]).collect();
            (0..dx.len())
                .map(|k| {
                    let t = unravel(k, &stored);
                    let mut l = vec![0; xs.len()];
                    for (j, &d) in perm.iter().enumerate() {
                        l[d] = t[j];
                    }
                    dx[l.iter().zip(&xs).fold(0, |acc, (&i, &d)| acc * d + i)]
                })
                .collect()
        }
        None => dx.clone(),
    };
    let mut inputs = vec![(x_in, dx_in), (w_in, dw_in)];
    if c.bias {
        inputs.push((b, db.clone()));
    }
    if matches!(tail, Tail::AddRelu | Tail::AddKeepConv) {
        inputs.push((res, dr.clone()));
    }
    // Fused tails leave the convolution as the region's only stage; an add whose input is
    // also an output runs as a group of its own.
    let ids: Vec<u32> = inputs.iter().map(|(id, _)| *id).collect();
    let spec = RegionSpec {
        ops: (0..tb.view(&ids, &outs).ops.len() as u32).collect(),
        inputs: ids.clone().into(),
        outputs: outs.clone().into(),
    };
    let region = Region::compile(&tb.view(&ids, &outs), &spec, services(), &[]).expect("compile");
    let want_stages = if tail == Tail::AddKeepConv { 2 } else { 1 };
    assert_eq!(region.stage_counts().0, want_stages, "stages of {tail:?}");
    let got = tb.run(&inputs, &outs);
    let conv_ref = c.naive(&dx, &dw, &db);
    let relu_f = |v: f64| if v > 0.0 { v } else { 0.0 };
    let want: Vec<Vec<f64>> = match tail {
        Tail::None => vec![conv_ref],
        Tail::Relu => vec![conv_ref.iter().map(|&v| relu_f(v)).collect()],
        Tail::AddRelu => vec![conv_ref
            .iter()
            .zip(&dr)
            .map(|(&v, &r)| relu_f(v + r as f64))
            .collect()],
        Tail::AddKeepConv => vec![
            conv_ref
                .iter()
                .zip(&dr)
                .map(|(&v, &r)| v + r as f64)
                .collect(),
            conv_ref,
        ],
    };
    let what = format!(
        "in {xs:?} w {ws:?} stride {:?} pad {:?} dil {:?} groups {} bias {} channels-last \
         weights {} input order {:?} tail {tail:?}",
        c.stride, c.pad, c.dil, c.groups, c.bias, c.channels_last_weights, c.input_order
    );
    // f32 rounding of a sum of `ck` terms (each about 1/3 in size: data in [-1, 1]): a random
    // walk of about sqrt(ck) roundings of half an ulp of a running sum about sqrt(ck) / 3 in
    // size, which outputs near zero (no relative slack) must be allowed too. The blocking of
    // the depth (256 or 252 steps) moves such an output by 2e-5 at ck = 4608.
    let ck = (c.c_in / c.groups * c.kernel.iter().product::<usize>()) as f64;
    let atol = 1e-5 + 4.0 * ck / 3.0 * f32::EPSILON as f64;
    for (g, w) in got.iter().zip(&want) {
        assert_close(g, w, 1e-4, atol, &what);
    }
    // With the weight static, the second and third runs take its kept packing (on AVX2 CPUs
    // without AVX-512: `packed_left.rs`).
    let runs = tb.run_static(&inputs, &outs, &[1], 3);
    for (run, got) in runs.iter().enumerate() {
        for (g, w) in got.iter().zip(&want) {
            assert_close(
                g,
                w,
                1e-4,
                atol,
                &format!("{what}, static weight, run {run}"),
            );
        }
    }
}

#[test]
fn conv2d_geometry_against_naive() {
    // 3x3 padded, strided, dilated; odd sizes; no bias.
    check(&case(2, 3, 5, &[7, 9], &[3, 3]).pad(&[1, 1]), Tail::None);
    check(
        &case(1, 4, 6, &[11, 8], &[3, 2]).stride(&[2, 3]),
        Tail::None,
    );
    check(
        &case(2, 3, 4, &[9, 10], &[3, 3])
            .dil(&[2, 1])
            .pad(&[2, 0])
            .no_bias(),
        Tail::None,
    );
    // A 7x7 stride-2 stem, ResNet style, and a window larger than the unpadded input.
    check(
        &case(1, 3, 8, &[15, 15], &[7, 7])
            .stride(&[2, 2])
            .pad(&[3, 3]),
        Tail::Relu,
    );
    check(&case(1, 2, 3, &[2, 2], &[3, 3]).pad(&[1, 1]), Tail::None);
}

#[test]
fn pointwise_convolutions_read_the_input_in_place() {
    // 1x1 stride 1 unpadded: the input is the column matrix; with stride 2 it is unrolled.
    check(&case(3, 16, 8, &[5, 7], &[1, 1]), Tail::None);
    check(
        &case(2, 16, 8, &[6, 7], &[1, 1]).stride(&[2, 2]),
        Tail::Relu,
    );
    check(&case(1, 6, 4, &[1, 1], &[1, 1]), Tail::Relu);
}

#[test]
fn grouped_and_depthwise_convolutions() {
    check(
        &case(2, 6, 9, &[6, 5], &[3, 3]).groups(3).pad(&[1, 1]),
        Tail::None,
    );
    // Depthwise: one input channel per group, two outputs each.
    check(
        &case(2, 8, 16, &[7, 7], &[3, 3])
            .groups(8)
            .pad(&[1, 1])
            .stride(&[2, 2]),
        Tail::Relu,
    );
}

#[test]
fn one_and_three_spatial_dims() {
    check(
        &case(2, 3, 4, &[13], &[5]).stride(&[2]).pad(&[2]),
        Tail::None,
    );
    check(
        &case(1, 2, 3, &[4, 5, 6], &[3, 2, 3])
            .pad(&[1, 0, 1])
            .stride(&[1, 2, 1]),
        Tail::AddRelu,
    );
}

#[test]
fn empty_batch_and_empty_channels() {
    check(&case(0, 3, 4, &[5, 5], &[3, 3]), Tail::AddRelu);
    check(&case(2, 3, 0, &[5, 5], &[3, 3]), Tail::None);
}

#[test]
fn residual_and_relu_epilogues() {
    check(&case(2, 8, 8, &[9, 9], &[3, 3]).pad(&[1, 1]), Tail::AddRelu);
    check(&case(2, 8, 8, &[9, 9], &[1, 1]), Tail::AddRelu);
    // The convolution's own result is needed too: the add runs unfused.
    check(
        &case(2, 8, 8, &[9, 9], &[3, 3]).pad(&[1, 1]),
        Tail::AddKeepConv,
    );
}

#[test]
fn large_convolutions_take_the_threaded_paths() {
    // Many blocks (items x row blocks): tasks over the threads.
    check(
        &case(4, 32, 32, &[20, 20], &[3, 3]).pad(&[1, 1]),
        Tail::AddRelu,
    );
    // One block (a small map at batch 1): the product split over output channels.
    check(
        &case(1, 128, 80, &[7, 7], &[3, 3]).pad(&[1, 1]),
        Tail::AddRelu,
    );
    check(&case(1, 256, 96, &[7, 7], &[1, 1]), Tail::Relu);
    // Products with every side at least 64 (on AVX2, `matrixmultiply`'s: `sgemm_avx2.rs`).
    check(&case(1, 128, 64, &[9, 9], &[1, 1]), Tail::Relu);
    check(
        &case(2, 64, 96, &[10, 10], &[3, 3]).pad(&[1, 1]),
        Tail::AddRelu,
    );
}

#[test]
fn relu_epilogue_keeps_nan_and_zeroes_negative_zero() {
    // maximum(x, 0.0) as the interpreter computes it: NaN propagates, -0.0 becomes +0.0. 40
    // positions: the packed path (static weight, runs 2 and 3) finishes the first 32 in
    // whole 16-wide tiles and the last 8 in a ragged one.
    let mut tb = Tb::default();
    let x = tb.value(F32, &[1, 1, 1, 40]);
    let w = tb.value(F32, &[1, 1, 1, 1]);
    let conv = tb.op(
        "convolution",
        vec![
            ArgView::Value(x),
            ArgView::Value(w),
            ArgView::None,
            ints(&[1, 1]),
            ints(&[0, 0]),
            ints(&[1, 1]),
            ArgView::Int(1),
        ],
        F32,
        &[1, 1, 1, 40],
    );
    let y = tb.op(
        "maximum",
        vec![ArgView::Value(conv), ArgView::Float(0.0)],
        F32,
        &[1, 1, 1, 40],
    );
    let xs: Vec<f32> = (0..40)
        .map(|i| [f32::NAN, -0.0, -2.0, 1.5][i % 4])
        .collect();
    let inputs = [(x, xs), (w, vec![1.0])];
    let mut runs = vec![tb.run(&inputs, &[y])];
    runs.extend(
        tb.run_static(&inputs, &[y], &[w], 3)
            .into_iter()
            .map(|mut r| r.remove(0))
            .map(|r| vec![r]),
    );
    for (run, got) in runs.iter().enumerate() {
        for (i, &v) in got[0].iter().enumerate() {
            let what = format!("run {run}, position {i}");
            match i % 4 {
                0 => assert!(v.is_nan(), "{what}: NaN, got {v}"),
                1 | 2 => assert_eq!(v.to_bits(), 0.0f32.to_bits(), "{what}: +0.0, got {v}"),
                _ => assert_eq!(v, 1.5, "{what}"),
            }
        }
    }
}

#[test]
fn maximum_with_negative_zero_is_not_a_relu_epilogue() {
    // maximum(x, -0.0) keeps -0.0 for negative x, which the ReLU epilogue does not: it must
    // stay a separate op (two stages) and give -0.0.
    let mut tb = Tb::default();
    let x = tb.value(F32, &[1, 1, 1, 2]);
    let w = tb.value(F32, &[1, 1, 1, 1]);
    let conv = tb.op(
        "convolution",
        vec![
            ArgView::Value(x),
            ArgView::Value(w),
            ArgView::None,
            ints(&[1, 1]),
            ints(&[0, 0]),
            ints(&[1, 1]),
            ArgView::Int(1),
        ],
        F32,
        &[1, 1, 1, 2],
    );
    let y = tb.op(
        "maximum",
        vec![ArgView::Value(conv), ArgView::Float(-0.0)],
        F32,
        &[1, 1, 1, 2],
    );
    let spec = RegionSpec {
        ops: vec![0, 1].into(),
        inputs: vec![x, w].into(),
        outputs: vec![y].into(),
    };
    let region = Region::compile(&tb.view(&[x, w], &[y]), &spec, services(), &[]).expect("compile");
    assert_eq!(region.stage_counts().0, 2);
    let got = tb.run(&[(x, vec![-3.0, 2.0]), (w, vec![1.0])], &[y]);
    assert_eq!(got[0][0].to_bits(), (-0.0f32).to_bits());
    assert_eq!(got[0][1], 2.0);
}

#[test]
fn same_width_convolutions_unroll_whole_row_runs() {
    // Stride 1, output as wide as the input: im2col copies each block's rows as one run of
    // the input plane and zeroes the side padding. Many row blocks (a 4608-long reduction
    // gives 64-column blocks: 6 rows of 10), so blocks start and end mid-image.
    check(
        &case(1, 512, 16, &[20, 10], &[3, 3]).pad(&[1, 1]),
        Tail::Relu,
    );
    // Wider padding (the run starts two elements before the plane), no padding in h (fewer
    // output rows than input rows), a single input row, width 1, and output rows that lie
    // entirely in the padding.
    check(&case(2, 3, 4, &[6, 9], &[5, 5]).pad(&[2, 2]), Tail::None);
    check(&case(1, 2, 3, &[7, 8], &[3, 5]).pad(&[0, 2]), Tail::AddRelu);
    check(&case(1, 2, 3, &[1, 6], &[3, 3]).pad(&[1, 1]), Tail::None);
    check(&case(2, 2, 3, &[5, 1], &[3, 1]).pad(&[1, 0]), Tail::None);
    check(&case(1, 2, 2, &[3, 4], &[3, 3]).pad(&[3, 1]), Tail::None);
}

#[test]
fn strided_2d_convolutions_over_row_blocks() {
    // The 2-D row path (column bounds per kernel column): stride 2 with odd sizes over many
    // row blocks, stride 3 in w only, and a kernel wider than the padded input's last column.
    check(
        &case(1, 512, 8, &[21, 13], &[3, 3])
            .stride(&[2, 2])
            .pad(&[1, 1]),
        Tail::Relu,
    );
    check(
        &case(2, 3, 4, &[9, 17], &[2, 4])
            .stride(&[1, 3])
            .pad(&[1, 2]),
        Tail::AddRelu,
    );
    check(
        &case(1, 2, 3, &[5, 3], &[3, 5]).stride(&[2, 2]).pad(&[0, 2]),
        Tail::None,
    );
}

#[test]
fn weights_in_another_order_are_read_as_a_strided_gemm_operand() {
    // `[C_in/G, *K, C_out]` storage transposed back in the region: the GEMM reads the weight
    // matrix with a row stride of 1 and a column stride of C_out instead of a packed copy.
    let cases = [
        case(1, 3, 64, &[15, 15], &[7, 7])
            .stride(&[2, 2])
            .pad(&[3, 3]),
        case(2, 20, 16, &[9, 7], &[3, 3]).pad(&[1, 1]),
        case(2, 40, 80, &[13, 11], &[1, 1]),
        case(1, 33, 32, &[11, 10], &[1, 1]).stride(&[2, 2]),
        case(1, 300, 16, &[3, 4], &[1, 1]),
        case(1, 8, 16, &[1, 1], &[1, 1]).no_bias(),
        case(1, 6, 9, &[6, 5], &[3, 3]).pad(&[1, 1]),
        case(2, 4, 6, &[9, 10], &[3, 3]).dil(&[2, 1]).pad(&[2, 0]),
        case(2, 3, 5, &[7], &[3]).pad(&[1]),
        case(1, 2, 16, &[3, 4, 5], &[2, 2, 2]),
        case(2, 96, 128, &[11, 11], &[3, 3]).pad(&[1, 1]),
    ];
    for c in &cases {
        let c = c.clone().channels_last_weights();
        check(&c, Tail::None);
        check(&c, Tail::AddRelu);
    }
}

#[test]
fn output_channel_contiguous_weights_read_the_columns_in_place() {
    // 2-D convolutions with a kernel of more than one element and at least 400 output
    // positions: with `[C_in/G, *K, C_out]` weights, AVX-512 runs them on
    // `conv_comajor::product_implicit` (the zero-bordered input read through offsets, the
    // output channels along the lanes). Channel counts off the 16-lane vectors and the
    // 64-channel groups, depths over one 256-deep block, more positions than one chunk of
    // the transposed output, strides, dilations, groups and a one-column kernel.
    let cases = [
        case(2, 40, 136, &[25, 25], &[3, 3]).pad(&[1, 1]),
        case(1, 6, 20, &[41, 43], &[3, 3])
            .stride(&[2, 2])
            .pad(&[1, 1]),
        case(1, 8, 24, &[24, 26], &[3, 3]).dil(&[2, 2]).pad(&[2, 2]),
        case(1, 16, 32, &[22, 22], &[3, 3]).pad(&[1, 1]).groups(4),
        case(1, 3, 64, &[45, 45], &[7, 7])
            .stride(&[2, 2])
            .pad(&[3, 3]),
        case(1, 5, 17, &[30, 20], &[3, 1]).pad(&[1, 0]).no_bias(),
        // Inputs in another order: rows still contiguous (`[N, H, C, W]`: planes and rows at
        // other strides, copied a plane at a time), and channels last (each row strided).
        case(2, 12, 40, &[21, 23], &[3, 3])
            .pad(&[1, 1])
            .input_order(&[0, 2, 1, 3]),
        case(2, 12, 40, &[21, 23], &[3, 3])
            .pad(&[1, 1])
            .input_order(&[0, 2, 3, 1]),
    ];
    for c in &cases {
        assert!(
            c.out_spatial().iter().product::<usize>() >= 400,
            "{:?}",
            c.out_spatial()
        );
        let c = c.clone().channels_last_weights();
        check(&c, Tail::None);
        check(&c, Tail::AddRelu);
    }
}

#[test]
fn winograd_tiles_cover_every_edge() {
    // 3x3 stride-1 convolutions with at least 16 channels each side and 32 tiles of 2 x 2
    // outputs run on `winograd.rs` on AVX-512 (the direct paths elsewhere): odd output sizes
    // (a last tile row and column half outside), no padding and padding of 2, few tiles
    // (one block, its output channels split over the threads, 48 of them: not a multiple of
    // the 32-channel split), many (blocks on threads of their own, a map of two blocks with
    // a short last one), weights in either order and inputs with strided rows. The static
    // runs of `check` take the kept transformed weight.
    let cases = [
        case(1, 32, 48, &[13, 11], &[3, 3]).pad(&[1, 1]),
        case(2, 24, 40, &[30, 34], &[3, 3]),
        case(1, 16, 16, &[12, 12], &[3, 3]).pad(&[2, 2]),
        case(1, 128, 32, &[28, 20], &[3, 3]).pad(&[1, 1]),
        case(2, 32, 32, &[15, 17], &[3, 3])
            .pad(&[1, 1])
            .input_order(&[0, 2, 3, 1]),
        case(1, 20, 24, &[16, 18], &[3, 3])
            .pad(&[1, 1])
            .channels_last_weights()
            .input_order(&[0, 2, 1, 3]),
    ];
    for c in &cases {
        check(c, Tail::None);
        check(c, Tail::AddRelu);
    }
}

/// A convolution (bias and ReLU fused) compiled with its weight static keeps the weight packed
/// from its second run on AVX2 CPUs without AVX-512 (`packed_left.rs`), and gives the naive
/// values on every run, when the weight is rewritten in place too (the run after the rewrite
/// packs per call, the next one packs it again).
#[test]
fn a_static_convolution_weight_is_packed_on_its_second_run() {
    let c = Case {
        pad: vec![1, 1],
        ..case(2, 8, 20, &[9, 7], &[3, 3])
    };
    let (xs, ws, os) = ([2i64, 8, 9, 7], [20i64, 8, 3, 3], dims(&c.out_shape()));
    let mut tb = Tb::default();
    let x = tb.value(F32, &xs);
    let w = tb.value(F32, &ws);
    let b = tb.value(F32, &[20]);
    let conv = tb.op(
        "convolution",
        vec![
            ArgView::Value(x),
            ArgView::Value(w),
            ArgView::Value(b),
            ints(&[1, 1]),
            ints(&[1, 1]),
            ints(&[1, 1]),
            ArgView::Int(1),
        ],
        F32,
        &os,
    );
    let y = tb.op(
        "maximum",
        vec![ArgView::Value(conv), ArgView::Float(0.0)],
        F32,
        &os,
    );
    let spec = RegionSpec {
        ops: vec![0, 1].into(),
        inputs: vec![x, w, b].into(),
        outputs: vec![y].into(),
    };
    let view = tb.view(&[x, w, b], &[y]);
    let region = Region::compile(&view, &spec, services(), &[1]).expect("compile");
    assert_eq!(region.stage_counts().0, 1);
    let n = |v: &[i64]| v.iter().product::<i64>() as usize;
    let (dx, mut dw, db) = (data(n(&xs), 1), data(n(&ws), 2), data(20, 3));
    let on = usize::from(crate::packed_left::applies_to_f32());
    for (round, packed_after) in [0, on, 0, on].into_iter().enumerate() {
        if round == 2 {
            for v in dw.iter_mut() {
                *v *= -2.0;
            }
        }
        let mut got = vec![f32::NAN; n(&os)];
        let ins = [
            super::f32_desc(dx.as_ptr(), &xs),
            super::f32_desc(dw.as_ptr(), &ws),
            super::f32_desc(db.as_ptr(), &[20]),
        ];
        let outs = [super::f32_desc(got.as_mut_ptr(), &os)];
        region
            .run(&ins, &outs, &thunder_abi::ExecContext::CPU)
            .expect("run");
        let want: Vec<f64> = c
            .naive(&dx, &dw, &db)
            .into_iter()
            .map(|v| v.max(0.0))
            .collect();
        assert_close(&got, &want, 1e-4, 1e-5, &format!("round {round}"));
        assert_eq!(
            region.packed_products(),
            packed_after,
            "round {round}: convolutions running on a kept packing"
        );
    }
    let plain = Region::compile(&view, &spec, services(), &[]).expect("compile");
    assert_eq!(plain.packed_products(), 0);
}
