//! Which convolutions cuDNN runs and how their geometry maps onto cuDNN's descriptors (pure
//! functions, no GPU needed).
//!
//! `prims.convolution(a, weight, bias, stride, padding, dilation, groups)`: `a` `[N, C_in, *S]`,
//! `weight` `[C_out, C_in / groups, *K]`, `bias` `[C_out]` or None, output `[N, C_out, *O]` with
//! `O = (S + 2p - d(K - 1) - 1) / s + 1`: cross-correlation, which is cuDNN's
//! `CUDNN_CROSS_CORRELATION` mode. cuDNN's convolution descriptors take 4-d or 5-d tensors, so a
//! 1-d convolution is run as a 2-d one over `[N, C, 1, L]` with a `[.., 1, K]` kernel (stride,
//! dilation 1 and padding 0 along the unit dim), as PyTorch does.

use thunder_abi::prims::{ConvPrim, Prim, PrimKind};
use thunder_abi::{ArgView, DTypeCode, DeviceKind, OpView, TraceView};

/// Spatial dims cuDNN's convolution descriptors take (2-d and 3-d; 1-d through a unit dim).
pub const MAX_SPATIAL: usize = 3;

/// The largest element count of one tensor: cuDNN's legacy convolution API indexes with 32-bit
/// integers and refuses larger tensors.
pub const MAX_ELEMENTS: i64 = i32::MAX as i64;

/// Whether this executor runs `prim` at all (for some dtype and arguments): what the plugin
/// advertises. One exhaustive `match`: a new prim does not compile until it is decided here.
pub fn claimable(prim: Prim) -> bool {
    match prim.kind() {
        PrimKind::Conv(p) => match p {
            ConvPrim::Convolution => true,
        },
        PrimKind::Unary(_)
        | PrimKind::Predicate(_)
        | PrimKind::Binary(_)
        | PrimKind::Compare(_)
        | PrimKind::Where(_)
        | PrimKind::Convert(_)
        | PrimKind::Shape(_)
        | PrimKind::Indexing(_)
        | PrimKind::Reduction(_)
        | PrimKind::Scan(_)
        | PrimKind::Sort(_)
        | PrimKind::Random(_)
        | PrimKind::Matmul(_)
        | PrimKind::Factory(_) => false,
    }
}

/// The dtypes cuDNN convolves: f16 and bf16 with f32 accumulation, f32 (FMA math, no TF32),
/// f64 (double accumulation).
pub fn dtype_ok(d: DTypeCode) -> bool {
    match d {
        DTypeCode::F16 | DTypeCode::BF16 | DTypeCode::F32 | DTypeCode::F64 => true,
        DTypeCode::Bool
        | DTypeCode::U8
        | DTypeCode::I8
        | DTypeCode::I16
        | DTypeCode::I32
        | DTypeCode::I64 => false,
    }
}

/// One convolution's geometry, in thunder's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv {
    pub dtype: DTypeCode,
    /// CUDA device ordinal.
    pub device: u32,
    pub n: i64,
    pub c_in: i64,
    pub c_out: i64,
    pub groups: i64,
    /// Input spatial sizes `S`.
    pub input: Vec<i64>,
    /// Kernel sizes `K`.
    pub kernel: Vec<i64>,
    pub stride: Vec<i64>,
    pub padding: Vec<i64>,
    pub dilation: Vec<i64>,
    /// Output spatial sizes `O`.
    pub output: Vec<i64>,
    pub bias: bool,
}

/// What a run of a convolution does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// The output is empty (`N = 0` or `C_out = 0`): nothing is launched.
    Nothing,
    /// Every window is empty (an input of no elements, as `C_in = 0`, or a zero-size spatial
    /// dim seen only through padding): the output is zeros, plus the bias.
    Fill,
    /// A cuDNN convolution (then the bias, if any).
    Convolve,
}

/// Output size of one spatial dim, `None` if the dilated kernel does not fit the padded input.
pub fn out_size(s: i64, k: i64, padding: i64, stride: i64, dilation: i64) -> Option<i64> {
    if k < 1 || stride < 1 || dilation < 1 || padding < 0 || s < 0 {
        return None;
    }
    let span = dilation.checked_mul(k - 1)?.checked_add(1)?;
    let padded = s.checked_add(padding.checked_mul(2)?)?;
    (padded >= span).then(|| (padded - span) / stride + 1)
}

/// Row-major strides of `shape` (size-0 dims count as 1, as the host lays them out).
pub fn packed_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    strides
}

fn numel(shape: &[i64]) -> i64 {
    shape.iter().product()
}

impl Conv {
    pub fn spatial(&self) -> usize {
        self.kernel.len()
    }

    pub fn x_shape(&self) -> Vec<i64> {
        [&[self.n, self.c_in][..], &self.input].concat()
    }

    pub fn w_shape(&self) -> Vec<i64> {
        [&[self.c_out, self.c_in / self.groups][..], &self.kernel].concat()
    }

    pub fn y_shape(&self) -> Vec<i64> {
        [&[self.n, self.c_out][..], &self.output].concat()
    }

    pub fn work(&self) -> Work {
        if numel(&self.y_shape()) == 0 {
            Work::Nothing
        } else if numel(&self.x_shape()) == 0 || numel(&self.w_shape()) == 0 {
            Work::Fill
        } else {
            Work::Convolve
        }
    }

    /// Multiply-adds times two.
    pub fn flops(&self) -> f64 {
        2.0 * numel(&self.y_shape()) as f64
            * (self.c_in / self.groups) as f64
            * numel(&self.kernel) as f64
    }

    /// The descriptors' geometry: 1-d convolutions become 2-d over a leading unit spatial dim.
    pub fn dnn(&self) -> Result<DnnGeometry, String> {
        let unit = self.spatial() == 1;
        let widen = |dims: Vec<i64>, fill: i64| -> Vec<i64> {
            if unit {
                let mut d = dims;
                d.insert(d.len() - 1, fill);
                d
            } else {
                dims
            }
        };
        let i32s = |what: &str, v: Vec<i64>| -> Result<Vec<i32>, String> {
            v.iter()
                .map(|&x| {
                    i32::try_from(x).map_err(|_| format!("{what} {v:?} overflows cuDNN's int"))
                })
                .collect()
        };
        let mut bias = vec![1i64; self.spatial().max(2) + 2];
        bias[1] = self.c_out;
        Ok(DnnGeometry {
            x: i32s("input", widen(self.x_shape(), 1))?,
            w: i32s("weight", widen(self.w_shape(), 1))?,
            y: i32s("output", widen(self.y_shape(), 1))?,
            bias: i32s("bias", bias)?,
            padding: i32s("padding", widen(self.padding.clone(), 0))?,
            stride: i32s("stride", widen(self.stride.clone(), 1))?,
            dilation: i32s("dilation", widen(self.dilation.clone(), 1))?,
        })
    }

    /// The strides cuDNN is to read an operand of thunder shape `shape` with (in elements,
    /// widened like [`Conv::dnn`]), or `None` when it is packed row-major (no copy needed).
    pub fn dnn_strides(&self, shape: &[i64], strides: &[i64]) -> Result<Option<Vec<i32>>, String> {
        if shape.len() != strides.len() {
            return Err(format!("shape {shape:?} with strides {strides:?}"));
        }
        let packed = packed_strides(shape);
        let same = shape
            .iter()
            .zip(strides.iter().zip(&packed))
            .all(|(&d, (&s, &p))| d <= 1 || s == p);
        if same || numel(shape) == 0 {
            return Ok(None);
        }
        // Size-1 dims may carry any stride: give them one cuDNN accepts.
        let mut s: Vec<i64> = Vec::with_capacity(shape.len() + 1);
        for (i, (&d, &st)) in shape.iter().zip(strides).enumerate() {
            if d > 1 && st <= 0 {
                return Err(format!(
                    "dim {i} of a [{}] operand has stride {st}: only positive strides can be read",
                    shape
                        .iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            s.push(if d > 1 { st } else { packed[i].max(1) });
        }
        if self.spatial() == 1 {
            let last = s.len() - 1;
            s.insert(last, s[last] * shape[last].max(1));
        }
        s.iter()
            .map(|&x| i32::try_from(x).map_err(|_| format!("stride {x} overflows cuDNN's int")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

impl Conv {
    /// The strides of the bias's `[1, C_out, 1, ...]` descriptor for a `[C_out]` bias of
    /// stride `stride`, or `None` when it is packed.
    pub fn bias_strides(&self, strides: &[i64]) -> Result<Option<Vec<i32>>, String> {
        let s = match strides {
            [s] => *s,
            other => return Err(format!("a bias has one stride, got {other:?}")),
        };
        if self.c_out <= 1 || s == 1 {
            return Ok(None);
        }
        if s <= 0 {
            return Err(format!(
                "the bias has stride {s}: only positive strides can be read"
            ));
        }
        let mut out = vec![s; self.spatial().max(2) + 2];
        out[0] = s.saturating_mul(self.c_out);
        out.iter()
            .map(|&x| i32::try_from(x).map_err(|_| format!("stride {x} overflows cuDNN's int")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// A convolution as cuDNN's descriptors see it (4-d or 5-d, NCHW / NCDHW).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnnGeometry {
    pub x: Vec<i32>,
    pub w: Vec<i32>,
    pub y: Vec<i32>,
    /// `[1, C_out, 1, ...]`, broadcast over the output by `cudnnAddTensor`.
    pub bias: Vec<i32>,
    pub padding: Vec<i32>,
    pub stride: Vec<i32>,
    pub dilation: Vec<i32>,
}

fn tensor(view: &TraceView, arg: Option<&ArgView>, what: &str) -> Result<u32, String> {
    match arg {
        Some(ArgView::Value(v)) if (*v as usize) < view.values.len() => Ok(*v),
        other => Err(format!("{what} is not a tensor: {other:?}")),
    }
}

fn ints<'a>(arg: Option<&'a ArgView>, what: &str, n: usize, min: i64) -> Result<&'a [i64], String> {
    match arg {
        Some(ArgView::Ints(v)) if v.len() == n && v.iter().all(|&x| x >= min) => Ok(v),
        other => Err(format!("{what} must be {n} ints >= {min}, got {other:?}")),
    }
}

/// The convolution `op` computes if this executor runs it, or why not.
pub fn conv_of(view: &TraceView, op: &OpView) -> Result<Conv, String> {
    match Prim::from_id(&op.symbol) {
        Some(p) if claimable(p) => {}
        _ => return Err(format!("{} is not a convolution", op.symbol)),
    }
    let a = tensor(view, op.args.first(), "input")?;
    let w = tensor(view, op.args.get(1), "weight")?;
    let b = match op.args.get(2) {
        Some(ArgView::None) => None,
        other => Some(tensor(view, other, "bias")?),
    };
    let out = match op.outputs.as_slice() {
        [o] if (*o as usize) < view.values.len() => *o,
        other => return Err(format!("expected one output, got {other:?}")),
    };
    let (am, wm, om) = (
        &view.values[a as usize],
        &view.values[w as usize],
        &view.values[out as usize],
    );
    if am.device.kind != DeviceKind::Cuda {
        return Err("the input is not a CUDA tensor".into());
    }
    if !dtype_ok(am.dtype) {
        return Err(format!(
            "cuDNN does not convolve {} tensors",
            am.dtype.short_name()
        ));
    }
    for (what, v) in [("weight", Some(w)), ("bias", b), ("output", Some(out))] {
        if let Some(v) = v {
            let m = &view.values[v as usize];
            if m.device != am.device || m.dtype != am.dtype {
                return Err(format!(
                    "{what} is {} on {:?}, the input {} on {:?}",
                    m.dtype.short_name(),
                    m.device,
                    am.dtype.short_name(),
                    am.device
                ));
            }
        }
    }
    let spatial = wm.shape.len().saturating_sub(2);
    if !(1..=MAX_SPATIAL).contains(&spatial) {
        return Err(format!(
            "{spatial} spatial dims (cuDNN convolves 1, 2 or 3)"
        ));
    }
    if am.shape.len() != spatial + 2 || om.shape.len() != spatial + 2 {
        return Err(format!(
            "input {:?}, weight {:?} and output {:?} differ in rank",
            am.shape, wm.shape, om.shape
        ));
    }
    let stride = ints(op.args.get(3), "stride", spatial, 1)?;
    let padding = ints(op.args.get(4), "padding", spatial, 0)?;
    let dilation = ints(op.args.get(5), "dilation", spatial, 1)?;
    let groups = match op.args.get(6) {
        Some(ArgView::Int(g)) if *g >= 1 => *g,
        other => return Err(format!("groups must be an int >= 1, got {other:?}")),
    };
    let (n, c_in, c_out) = (am.shape[0], am.shape[1], wm.shape[0]);
    if c_out % groups != 0 || c_in != wm.shape[1] * groups {
        return Err(format!(
            "input {:?} and weight {:?} do not fit {groups} groups",
            am.shape, wm.shape
        ));
    }
    if let Some(b) = b {
        if view.values[b as usize].shape.as_slice() != [c_out] {
            return Err(format!(
                "bias {:?} is not [{c_out}]",
                view.values[b as usize].shape
            ));
        }
    }
    let input = am.shape[2..].to_vec();
    let kernel = wm.shape[2..].to_vec();
    let mut output = Vec::with_capacity(spatial);
    for d in 0..spatial {
        let o = out_size(input[d], kernel[d], padding[d], stride[d], dilation[d])
            .ok_or_else(|| format!("spatial dim {d}: the kernel does not fit the input"))?;
        output.push(o);
    }
    let conv = Conv {
        dtype: am.dtype,
        device: am.device.index,
        n,
        c_in,
        c_out,
        groups,
        input,
        kernel,
        stride: stride.to_vec(),
        padding: padding.to_vec(),
        dilation: dilation.to_vec(),
        output,
        bias: b.is_some(),
    };
    if om.shape.as_slice() != conv.y_shape() {
        return Err(format!(
            "output {:?} is not the convolution's {:?}",
            om.shape,
            conv.y_shape()
        ));
    }
    for (what, shape) in [
        ("input", conv.x_shape()),
        ("weight", conv.w_shape()),
        ("output", conv.y_shape()),
    ] {
        let elements = shape
            .iter()
            .try_fold(1i64, |acc, &d| acc.checked_mul(d.max(1)));
        if !matches!(elements, Some(e) if e <= MAX_ELEMENTS) {
            return Err(format!(
                "the {what} {shape:?} has over 2^31 elements (cuDNN's limit)"
            ));
        }
    }
    conv.dnn()?;
    Ok(conv)
}

/// The regions claimed in `view`: each convolution cuDNN runs, alone.
pub fn claims(view: &TraceView) -> Vec<Vec<u32>> {
    view.ops
        .iter()
        .enumerate()
        .filter(|(_, op)| !op.claimed && conv_of(view, op).is_ok())
        .map(|(i, _)| vec![i as u32])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[N, C_in, H = W, C_out, K]` and `[stride, padding, dilation, groups]`.
    fn conv2d([n, c, hw, co, k]: [i64; 5], [s, p, d, g]: [i64; 4]) -> Conv {
        let o = out_size(hw, k, p, s, d).expect("fits");
        Conv {
            dtype: DTypeCode::F32,
            device: 0,
            n,
            c_in: c,
            c_out: co,
            groups: g,
            input: vec![hw, hw],
            kernel: vec![k, k],
            stride: vec![s, s],
            padding: vec![p, p],
            dilation: vec![d, d],
            output: vec![o, o],
            bias: false,
        }
    }

    #[test]
    fn output_sizes_follow_torch() {
        // torch.nn.functional.conv2d shapes.
        assert_eq!(out_size(56, 3, 1, 1, 1), Some(56));
        assert_eq!(out_size(224, 7, 3, 2, 1), Some(112));
        assert_eq!(out_size(10, 3, 0, 3, 1), Some(3));
        assert_eq!(out_size(10, 3, 2, 1, 3), Some(8));
        assert_eq!(out_size(5, 2, 0, 1, 1), Some(4));
        // The dilated kernel (span 7) just fits 5 + 2, and does not fit 5.
        assert_eq!(out_size(5, 4, 1, 1, 2), Some(1));
        assert_eq!(out_size(5, 4, 0, 1, 2), None);
        // An empty input seen through padding: windows of zeros.
        assert_eq!(out_size(0, 1, 1, 1, 1), Some(2));
        assert_eq!(out_size(4, 0, 0, 1, 1), None);
    }

    #[test]
    fn groups_split_the_weight_channels() {
        let c = conv2d([2, 8, 9, 12, 3], [2, 1, 1, 4]);
        assert_eq!(c.w_shape(), vec![12, 2, 3, 3]);
        assert_eq!(c.y_shape(), vec![2, 12, 5, 5]);
        assert_eq!(c.flops(), 2.0 * (2 * 12 * 25) as f64 * 2.0 * 9.0);
        let depthwise = conv2d([1, 16, 8, 16, 3], [1, 1, 1, 16]);
        assert_eq!(depthwise.w_shape(), vec![16, 1, 3, 3]);
    }

    #[test]
    fn one_dim_runs_as_two_dims_over_a_unit_dim() {
        let c = Conv {
            dtype: DTypeCode::F16,
            device: 0,
            n: 4,
            c_in: 6,
            c_out: 3,
            groups: 3,
            input: vec![20],
            kernel: vec![5],
            stride: vec![2],
            padding: vec![3],
            dilation: vec![2],
            output: vec![out_size(20, 5, 3, 2, 2).expect("fits")],
            bias: true,
        };
        let g = c.dnn().expect("fits");
        assert_eq!(g.x, vec![4, 6, 1, 20]);
        assert_eq!(g.w, vec![3, 2, 1, 5]);
        assert_eq!(g.y, vec![4, 3, 1, 9]);
        assert_eq!(g.bias, vec![1, 3, 1, 1]);
        assert_eq!(g.padding, vec![0, 3]);
        assert_eq!(g.stride, vec![1, 2]);
        assert_eq!(g.dilation, vec![1, 2]);
        // A transposed [4, 6, 20] input (strides of its [20, 6]-major layout).
        assert_eq!(
            c.dnn_strides(&[4, 6, 20], &[120, 1, 6]).expect("positive"),
            Some(vec![120, 1, 120, 6])
        );
        assert_eq!(
            c.dnn_strides(&[4, 6, 20], &[120, 20, 1]).expect("packed"),
            None
        );
    }

    #[test]
    fn three_dims_keep_five_d_descriptors() {
        let c = Conv {
            dtype: DTypeCode::BF16,
            device: 1,
            n: 2,
            c_in: 4,
            c_out: 8,
            groups: 1,
            input: vec![5, 6, 7],
            kernel: vec![3, 3, 1],
            stride: vec![1, 2, 1],
            padding: vec![1, 0, 0],
            dilation: vec![1, 1, 1],
            output: vec![5, 2, 7],
            bias: true,
        };
        let g = c.dnn().expect("fits");
        assert_eq!(g.x, vec![2, 4, 5, 6, 7]);
        assert_eq!(g.bias, vec![1, 8, 1, 1, 1]);
        assert_eq!(g.stride, vec![1, 2, 1]);
    }

    #[test]
    fn work_says_what_launches() {
        assert_eq!(conv2d([0, 3, 8, 4, 3], [1, 1, 1, 1]).work(), Work::Nothing);
        assert_eq!(conv2d([2, 3, 8, 0, 3], [1, 1, 1, 1]).work(), Work::Nothing);
        assert_eq!(conv2d([2, 0, 8, 4, 3], [1, 1, 1, 1]).work(), Work::Fill);
        assert_eq!(conv2d([2, 3, 0, 4, 1], [1, 1, 1, 1]).work(), Work::Fill);
        assert_eq!(conv2d([2, 3, 8, 4, 3], [1, 1, 1, 1]).work(), Work::Convolve);
    }

    #[test]
    fn strides_of_size_one_dims_do_not_matter_and_broadcasts_are_refused() {
        let c = conv2d([1, 3, 4, 2, 3], [1, 1, 1, 1]);
        assert_eq!(
            c.dnn_strides(&[1, 3, 4, 4], &[0, 16, 4, 1]).expect("ok"),
            None
        );
        assert_eq!(
            c.dnn_strides(&[1, 3, 4, 4], &[7, 1, 12, 3]).expect("ok"),
            Some(vec![48, 1, 12, 3])
        );
        let e = c
            .dnn_strides(&[1, 3, 4, 4], &[48, 0, 4, 1])
            .expect_err("broadcast");
        assert!(e.contains("stride 0"), "{e}");
        assert_eq!(c.bias_strides(&[1]).expect("packed"), None);
        assert_eq!(
            c.bias_strides(&[3]).expect("strided"),
            Some(vec![6, 3, 3, 3])
        );
        assert!(c.bias_strides(&[0]).is_err());
    }

    #[test]
    fn only_convolution_is_claimable() {
        for &p in Prim::ALL {
            assert_eq!(claimable(p), p == Prim::Convolution, "{}", p.id());
        }
    }
}
