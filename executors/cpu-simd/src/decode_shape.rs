//! Decoding of the shape, reduction, matmul and factory prims (see `decode.rs`).

use crate::decode::{fail, Cx, Lit, Op, Ty, R};
use crate::ops::ReduceOp;
use thunder_abi::{ArgView, DeviceKind};

impl Cx<'_> {
    fn ints(&self, i: usize) -> R<&[i64]> {
        match self.args.get(i) {
            Some(ArgView::Ints(v)) => Ok(v.as_slice()),
            other => fail(format!(
                "argument {i} must be a list of ints, got {other:?}"
            )),
        }
    }

    fn shape_arg(&self, i: usize) -> R<Vec<usize>> {
        self.ints(i)?
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("negative dim in argument {i}")))
            .collect()
    }

    /// Distinct dims in `[0, rank)`.
    fn dims_arg(&self, i: usize, rank: usize) -> R<Vec<usize>> {
        let mut seen = vec![false; rank];
        self.ints(i)?
            .iter()
            .map(
                |&d| match usize::try_from(d).ok().filter(|&d| d < rank && !seen[d]) {
                    Some(d) => {
                        seen[d] = true;
                        Ok(d)
                    }
                    None => fail(format!(
                        "argument {i}: dims must be distinct and in [0, {rank})"
                    )),
                },
            )
            .collect()
    }

    pub(crate) fn broadcast(&self) -> R<Op> {
        self.arity(3)?;
        let (a, ty, in_shape) = self.tensor(0)?;
        let shape = self.shape_arg(1)?;
        let dims = self.dims_arg(2, shape.len())?;
        if dims.len() != in_shape.len() {
            return fail("broadcast_dims must name one output dim per input dim");
        }
        if in_shape
            .iter()
            .zip(&dims)
            .any(|(&s, &d)| s != 1 && s != shape[d])
        {
            return fail("an input dim must be 1 or equal to its output dim");
        }
        self.expect_out(ty, &shape)?;
        Ok(Op::Broadcast { a, dims })
    }

    pub(crate) fn reshape(&self) -> R<Op> {
        self.arity(2)?;
        let (a, ty, in_shape) = self.tensor(0)?;
        let shape = self.shape_arg(1)?;
        if shape.iter().product::<usize>() != in_shape.iter().product::<usize>() {
            return fail("reshape changes the element count");
        }
        self.expect_out(ty, &shape)?;
        Ok(Op::Reshape { a })
    }

    pub(crate) fn transpose(&self) -> R<Op> {
        self.arity(2)?;
        let (a, ty, in_shape) = self.tensor(0)?;
        let perm = self.dims_arg(1, in_shape.len())?;
        if perm.len() != in_shape.len() {
            return fail("the permutation must name every dim");
        }
        let shape: Vec<usize> = perm.iter().map(|&p| in_shape[p]).collect();
        self.expect_out(ty, &shape)?;
        Ok(Op::Transpose { a, perm })
    }

    pub(crate) fn reduce(&self, op: ReduceOp) -> R<Op> {
        self.arity(2)?;
        let (a, ty, in_shape) = self.tensor(0)?;
        if !ty.is_float() {
            return fail(format!("{ty:?} reductions are left to other executors"));
        }
        let dims = self.dims_arg(1, in_shape.len())?;
        if op != ReduceOp::Sum && dims.iter().any(|&d| in_shape[d] == 0) {
            return fail("the extremum over a dim of size 0 has no value");
        }
        let shape: Vec<usize> = (0..in_shape.len())
            .filter(|d| !dims.contains(d))
            .map(|d| in_shape[d])
            .collect();
        self.expect_out(ty, &shape)?;
        Ok(Op::Reduce { op, a, dims })
    }

    pub(crate) fn matmul(&self) -> R<Op> {
        self.arity(2)?;
        let ((a, ta, sa), (b, tb, sb)) = (self.tensor(0)?, self.tensor(1)?);
        let r = sa.len();
        if r < 2 || sb.len() != r || sa[..r - 2] != sb[..r - 2] || sa[r - 1] != sb[r - 2] {
            return fail("expects [..., m, k] @ [..., k, n] with equal batch dims");
        }
        if ta != tb || !ta.is_float() {
            return fail("operands must both be f32 or both f64");
        }
        let mut shape = sa[..r - 1].to_vec();
        shape.push(sb[r - 1]);
        self.expect_out(ta, &shape)?;
        Ok(Op::Matmul { a, b })
    }

    fn cpu_device(&self, i: usize) -> R<()> {
        match self.args.get(i) {
            Some(ArgView::Device(d)) if d.kind == DeviceKind::Cpu => Ok(()),
            other => fail(format!(
                "argument {i} must be the CPU device, got {other:?}"
            )),
        }
    }

    fn dtype_arg(&self, i: usize) -> R<()> {
        match self.args.get(i) {
            Some(ArgView::DType(d)) if Ty::of(*d) == Some(self.ty) => Ok(()),
            other => fail(format!(
                "argument {i} must be the output dtype, got {other:?}"
            )),
        }
    }

    pub(crate) fn full(&self) -> R<Op> {
        self.arity(4)?;
        let shape = self.shape_arg(0)?;
        self.cpu_device(2)?;
        self.dtype_arg(3)?;
        // Only fills whose value needs no rounding or range check beyond a float cast.
        let value = match (self.args.get(1), self.ty) {
            (Some(ArgView::Float(v)), Ty::F32 | Ty::F64) => Lit::F(*v),
            (Some(ArgView::Int(v)), Ty::F32 | Ty::F64) => Lit::I(*v),
            (Some(ArgView::Bool(v)), Ty::F32 | Ty::F64) => Lit::B(*v),
            (Some(ArgView::Bool(v)), Ty::B8) => Lit::B(*v),
            (Some(ArgView::Int(v)), Ty::I64) => Lit::I(*v),
            (other, ty) => return fail(format!("fill value {other:?} for {ty:?}")),
        };
        self.expect_out(self.ty, &shape)?;
        Ok(Op::Full { value })
    }

    pub(crate) fn iota(&self) -> R<Op> {
        self.arity(5)?;
        let int = |i: usize| match self.args.get(i) {
            Some(ArgView::Int(v)) => Ok(*v),
            other => fail(format!("argument {i} must be an int, got {other:?}")),
        };
        let (length, start, step) = (int(0)?, int(1)?, int(2)?);
        let length = usize::try_from(length).map_err(|_| "negative length".to_string())?;
        self.cpu_device(3)?;
        self.dtype_arg(4)?;
        if self.ty == Ty::B8 {
            return fail("iota of b8");
        }
        self.expect_out(self.ty, &[length])?;
        Ok(Op::Iota { start, step })
    }
}
