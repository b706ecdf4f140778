//! matmul with torch's 1-D and batch-broadcasting semantics, bmm, and linear.

use crate::elementwise::add;
use crate::shape::transpose;
use crate::{call1, CallArgs};
use thunder_core::clang;
use thunder_core::error::{bail_op, Error, OpErrorKind, Result};
use thunder_core::ir::{Arg, ShapeDisplay};
use thunder_core::prims::{prim1, Prim};
use thunder_core::tensor::Tensor;

pub(crate) fn matmul_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let (a, b) = (c.tensor(0)?, c.tensor(1)?);
    if a.rank() == 0 || b.rank() == 0 {
        bail_op!(
            c.op,
            "both arguments need to be at least 1-D, got {} and {}",
            ShapeDisplay(a.shape()),
            ShapeDisplay(b.shape())
        );
    }
    let k_a = a.shape()[a.rank() - 1];
    let k_b = if b.rank() == 1 {
        b.shape()[0]
    } else {
        b.shape()[b.rank() - 2]
    };
    if k_a != k_b {
        return Err(Error::op_kind(
            c.op,
            OpErrorKind::ShapeMismatch {
                a: a.shape().to_vec(),
                b: b.shape().to_vec(),
                rule: format!("do not match as matmul operands (inner dims {k_a} != {k_b})"),
            },
        ));
    }
    // 1-D operands become matrices, and their added dim is dropped from the result.
    let a2 = if a.rank() == 1 {
        clang::reshape(&a, vec![1, k_a])?
    } else {
        a.clone()
    };
    let b2 = if b.rank() == 1 {
        clang::reshape(&b, vec![k_b, 1])?
    } else {
        b.clone()
    };
    let (ra, rb) = (a2.rank(), b2.rank());
    if ra >= 3 && rb == 2 {
        return Ok(vec![folded_matmul(&a2, &b, &b2)?]);
    }
    let batch = clang::broadcast_shapes(c.op, &[&a2.shape()[..ra - 2], &b2.shape()[..rb - 2]])?;
    let with_batch = |t: &Tensor, r: usize| -> Result<Tensor> {
        let mut shape = batch.clone();
        shape.extend_from_slice(&t.shape()[r - 2..]);
        clang::expand_to(t, &shape)
    };
    let (a3, b3) = (with_batch(&a2, ra)?, with_batch(&b2, rb)?);
    let out = prim1(
        Prim::Matmul,
        vec![Arg::Value(a3.value()), Arg::Value(b3.value())],
    )?;
    let mut shape = batch;
    if a.rank() > 1 {
        shape.push(a.shape()[a.rank() - 2]);
    }
    if b.rank() > 1 {
        shape.push(b.shape()[b.rank() - 1]);
    }
    Ok(vec![clang::reshape(&out, shape)?])
}

/// `a2 @ b2` with `a2` of rank 3 or more and `b2` a matrix, as torch does it: the batch dims
/// fold into the rows of one GEMM. Broadcasting `b2` over the batch instead makes its gradient
/// a batched product summed over the batch: a linear layer's weight gradient was 8 GEMMs of
/// K 1024 writing 8 copies of the weight's shape and a reduction over them, not one GEMM of K
/// 8192.
fn folded_matmul(a2: &Tensor, b: &Tensor, b2: &Tensor) -> Result<Tensor> {
    let ra = a2.rank();
    let k = a2.shape()[ra - 1];
    let rows: i64 = a2.shape()[..ra - 1].iter().product();
    let flat = clang::reshape(a2, vec![rows, k])?;
    let out = prim1(
        Prim::Matmul,
        vec![Arg::Value(flat.value()), Arg::Value(b2.value())],
    )?;
    let mut shape = a2.shape()[..ra - 1].to_vec();
    if b.rank() > 1 {
        shape.push(b2.shape()[1]);
    }
    clang::reshape(&out, shape)
}

pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    call1(
        "ltorch.matmul",
        vec![Arg::Value(a.value()), Arg::Value(b.value())],
    )
}

pub(crate) fn linear_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(3)?;
    let (x, w) = (c.tensor(0)?, c.tensor(1)?);
    if w.rank() == 0 || w.rank() > 2 {
        bail_op!(
            c.op,
            "weight must be 1-D or 2-D, got {}",
            ShapeDisplay(w.shape())
        );
    }
    let wt = if w.rank() == 2 {
        transpose(&w, 0, 1)?
    } else {
        w.clone()
    };
    let y = crate::linalg::matmul(&x, &wt)?;
    Ok(vec![match c.opt_tensor(2)? {
        Some(bias) => add(&y, &bias)?,
        None => y,
    }])
}

/// `x @ w.T + bias`.
pub fn linear(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let b = bias.map_or(Arg::None, |b| Arg::Value(b.value()));
    call1(
        "ltorch.linear",
        vec![Arg::Value(x.value()), Arg::Value(w.value()), b],
    )
}

/// Batched matmul of two 3-D tensors with equal batch sizes, as torch.bmm.
pub(crate) fn bmm_rule(c: &CallArgs) -> Result<Vec<Tensor>> {
    c.expect(2)?;
    let (a, b) = (c.tensor(0)?, c.tensor(1)?);
    if a.rank() != 3 || b.rank() != 3 || a.shape()[0] != b.shape()[0] {
        bail_op!(
            c.op,
            "expected [B, N, K] and [B, K, M], got {} and {}",
            ShapeDisplay(a.shape()),
            ShapeDisplay(b.shape())
        );
    }
    Ok(vec![crate::linalg::matmul(&a, &b)?])
}

pub fn bmm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    call1(
        "ltorch.bmm",
        vec![Arg::Value(a.value()), Arg::Value(b.value())],
    )
}
