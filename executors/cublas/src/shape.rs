//! Which ops cuBLASLt runs and how a row-major product maps onto its column-major API.
//!
//! cuBLASLt is column-major. A row-major `[m, k] @ [k, n] = [m, n]` is the column-major
//! product `D' (n x m) = B' (n x k) x A' (k x m)`, where each primed matrix is the same memory
//! read column-major. So the Lt "A" operand is our right-hand side and the Lt "B" operand our
//! left-hand side, and no data moves. `linear` multiplies by `w` transposed: `w` is `[n, k]`
//! row-major, i.e. `k x n` column-major, and Lt's transA gives the `n x k` it needs.
//! A bias of length `n` is a bias over the rows of `D'`, which is what Lt's bias epilogue adds.
//! In general each operand is a strided matrix ([`Operand`], found by `layout.rs`): a row-major
//! one is read by Lt untransposed, a transposed (column-major) one with `trans`; [`LtCall`] is
//! exactly what Lt is given, and the tests emulate it as column-major BLAS.

use crate::layout::Operand;
use thunder_abi::prims::Prim;
use thunder_abi::{ArgView, DTypeCode, DeviceKind, OpView, TraceView};

/// One product to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gemm {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// Products in the batch (one stride per operand).
    pub batch: u64,
    pub dtype: DTypeCode,
    /// Where the `m x k` left operand, the `k x n` right operand and the `m x n` output lie in
    /// their buffers (the output is always row-major; see `layout.rs`).
    pub lhs: Operand,
    pub rhs: Operand,
    pub out: Operand,
    pub bias: bool,
    /// tanh-approximated GELU applied after the bias (Lt's GELU epilogue).
    pub gelu: bool,
}

impl Gemm {
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }
}

fn meta(view: &TraceView, v: u32) -> Option<(&[i64], DTypeCode, DeviceKind)> {
    let m = view.values.get(v as usize)?;
    Some((&m.shape, m.dtype, m.device.kind))
}

fn dtype_ok(d: DTypeCode) -> bool {
    matches!(d, DTypeCode::F32 | DTypeCode::F16 | DTypeCode::BF16)
}

fn positive(dims: &[i64]) -> Option<u64> {
    dims.iter()
        .try_fold(1u64, |acc, &d| (d > 0).then(|| acc * d as u64))
}

/// The product `op` computes, if this executor runs it: `prims.matmul` of CUDA tensors, or
/// `ltorch.linear` with a 2-D weight (claimed whole, before it is decomposed). Empty dims are
/// left to other executors.
pub fn gemm_of(view: &TraceView, op: &OpView) -> Option<Gemm> {
    let tensors: Vec<u32> = op.input_values().collect();
    let out = *op.outputs.first()?;
    let (out_shape, out_dtype, out_dev) = meta(view, out)?;
    if out_dev != DeviceKind::Cuda || !dtype_ok(out_dtype) {
        return None;
    }
    for &t in &tensors {
        let (_, d, dev) = meta(view, t)?;
        if dev != DeviceKind::Cuda || d != out_dtype {
            return None;
        }
    }
    if &*op.symbol == Prim::Matmul.id() {
        let [a, b] = tensors.as_slice() else {
            return None;
        };
        let (sa, sb) = (meta(view, *a)?.0, meta(view, *b)?.0);
        if sa.len() < 2 || sa.len() != sb.len() || sa[..sa.len() - 2] != sb[..sb.len() - 2] {
            return None;
        }
        let r = sa.len();
        let (m, k, n) = (
            positive(&sa[r - 2..r - 1])?,
            positive(&sa[r - 1..])?,
            positive(&sb[r - 1..])?,
        );
        return Some(Gemm {
            m,
            n,
            k,
            batch: positive(&sa[..r - 2])?,
            dtype: out_dtype,
            lhs: Operand::row_major(m, k),
            rhs: Operand::row_major(k, n),
            out: Operand::row_major(m, n),
            bias: false,
            gelu: false,
        });
    }
    if &*op.symbol == "ltorch.linear" {
        let x = match op.args.first()? {
            ArgView::Value(v) => *v,
            _ => return None,
        };
        let w = match op.args.get(1)? {
            ArgView::Value(v) => *v,
            _ => return None,
        };
        let bias = matches!(op.args.get(2), Some(ArgView::Value(_)));
        let (sx, sw) = (meta(view, x)?.0, meta(view, w)?.0);
        if sx.len() < 2 || sw.len() != 2 || sx[sx.len() - 1] != sw[1] {
            return None;
        }
        if let Some(ArgView::Value(b)) = op.args.get(2) {
            if meta(view, *b)?.0 != [sw[0]] {
                return None;
            }
        }
        // Leading dims of x fold into m: x is contiguous. w is `[n, k]`: the `k x n` right
        // operand stored transposed.
        let (m, k, n) = (
            positive(&sx[..sx.len() - 1])?,
            positive(&sw[1..])?,
            positive(&sw[..1])?,
        );
        return Some(Gemm {
            m,
            n,
            k,
            batch: 1,
            dtype: out_dtype,
            lhs: Operand::row_major(m, k),
            rhs: Operand::row_major(n, k).flipped(),
            out: Operand::row_major(m, n),
            bias,
            gelu: false,
        })
        .filter(|_| out_shape.last() == Some(&sw[0]));
    }
    None
}

/// Whether `gelu_op` is `ltorch.gelu(t, "tanh")` of the only use of `linear_out`.
pub fn is_tanh_gelu_of(view: &TraceView, gelu_op: &OpView, linear_out: u32) -> bool {
    &*gelu_op.symbol == "ltorch.gelu"
        && matches!(gelu_op.args.first(), Some(ArgView::Value(v)) if *v == linear_out)
        && matches!(gelu_op.args.get(1), Some(ArgView::Str(s)) if s.as_str() == "tanh")
        && view
            .ops
            .iter()
            .filter(|o| o.input_values().any(|v| v == linear_out))
            .count()
            == 1
        && !view.outputs.contains(&linear_out)
}

/// One cuBLASLt matrix layout: `batch` column-major `rows x cols` matrices with leading dim
/// `ld`, `stride` elements apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LtMatrix {
    pub rows: u64,
    pub cols: u64,
    pub ld: u64,
    pub batch: u64,
    pub stride: u64,
}

/// What `cublasLtMatmul` is given for a product: `D = op(A) op(B)` in column-major terms, with
/// `op` the transpose where `transa` / `transb` say so. Lt's A is our right operand, Lt's B our
/// left one and D our output, each read column-major (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LtCall {
    pub transa: bool,
    pub transb: bool,
    pub a: LtMatrix,
    pub b: LtMatrix,
    pub d: LtMatrix,
}

impl Gemm {
    pub fn lt_call(&self) -> LtCall {
        // A row-major `rows x cols` operand is the column-major `cols x rows` matrix, used
        // transposed by `op`; a transposed one is the column-major `rows x cols` matrix as is.
        let mat = |o: Operand, rows: u64, cols: u64| {
            let (r, c) = if o.transposed {
                (rows, cols)
            } else {
                (cols, rows)
            };
            LtMatrix {
                rows: r,
                cols: c,
                ld: o.ld,
                batch: self.batch,
                stride: o.batch_stride,
            }
        };
        LtCall {
            transa: self.rhs.transposed,
            transb: self.lhs.transposed,
            a: mat(self.rhs, self.k, self.n),
            b: mat(self.lhs, self.m, self.k),
            d: mat(self.out, self.m, self.n),
        }
    }
}
