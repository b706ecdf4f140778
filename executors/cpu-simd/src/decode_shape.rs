//! Decoding of the shape, reduction, matmul and factory prims (see `decode.rs`).

use crate::decode::{fail, float_lit, Cx, Lit, Op, Operand, Ty, R};
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

    /// `slice(a, start, end, strides)`: a view, as the interpreter checks it.
    pub(crate) fn slice(&self) -> R<Op> {
        self.arity(4)?;
        let (a, ty, in_shape) = self.tensor(0)?;
        let rank = in_shape.len();
        let (start, end, step) = (self.ints(1)?, self.ints(2)?, self.ints(3)?);
        if start.len() != rank || end.len() != rank || step.len() != rank {
            return fail(format!(
                "start, end and strides need {rank} entries each, got {}, {} and {}",
                start.len(),
                end.len(),
                step.len()
            ));
        }
        let mut shape = Vec::with_capacity(rank);
        for d in 0..rank {
            let (s, e, st) = (start[d], end[d], step[d]);
            if st < 1 || s < 0 || s > e || e > in_shape[d] as i64 {
                return fail(format!(
                    "dim {d}: start {s}, end {e}, stride {st} do not fit size {}",
                    in_shape[d]
                ));
            }
            shape.push(if e == s {
                0
            } else {
                ((e - s - 1) / st + 1) as usize
            });
        }
        self.expect_out(ty, &shape)?;
        Ok(Op::Slice {
            a,
            start: start.iter().map(|&s| s as usize).collect(),
            step: step.iter().map(|&s| s as usize).collect(),
        })
    }

    /// `take(a, index, dim)`: `index` a 1-D i64 tensor; its values are checked when run.
    pub(crate) fn take(&self) -> R<Op> {
        self.arity(3)?;
        let (a, ty, in_shape) = self.tensor(0)?;
        let (index, ity, ishape) = self.tensor(1)?;
        let dim = match self.args.get(2) {
            Some(ArgView::Int(d)) => usize::try_from(*d)
                .ok()
                .filter(|&d| d < in_shape.len())
                .ok_or_else(|| format!("dim {d} is not in [0, {})", in_shape.len()))?,
            other => return fail(format!("argument 2 must be an int dim, got {other:?}")),
        };
        let &[len] = ishape.as_slice() else {
            return fail(format!("index must be 1-D, got {ishape:?}"));
        };
        if ity != Ty::I64 {
            return fail(format!("index must be i64, got {ity:?}"));
        }
        let mut shape = in_shape;
        shape[dim] = len;
        self.expect_out(ty, &shape)?;
        Ok(Op::Take { a, index, dim })
    }

    /// `index_add(a, index, src, dim)`: `index` a 1-D i64 tensor of `src.shape[dim]` values
    /// (checked when run), `src` shaped as `a` but for `dim`; f32, f64 and i64.
    pub(crate) fn index_add(&self) -> R<Op> {
        self.arity(4)?;
        let (a, ty, in_shape) = self.tensor(0)?;
        let (index, ity, ishape) = self.tensor(1)?;
        let (src, sty, sshape) = self.tensor(2)?;
        let dim = match self.args.get(3) {
            Some(ArgView::Int(d)) => usize::try_from(*d)
                .ok()
                .filter(|&d| d < in_shape.len())
                .ok_or_else(|| format!("dim {d} is not in [0, {})", in_shape.len()))?,
            other => return fail(format!("argument 3 must be an int dim, got {other:?}")),
        };
        if !matches!(ty, Ty::F32 | Ty::F64 | Ty::I64) || sty != ty {
            return fail(format!("index_add of {ty:?} with a {sty:?} source"));
        }
        if ity != Ty::I64 || ishape.len() != 1 {
            return fail(format!(
                "index must be a 1-D i64 tensor, got {ity:?}{ishape:?}"
            ));
        }
        let mut want = in_shape.clone();
        want[dim] = ishape[0];
        if sshape != want {
            return fail(format!("source {sshape:?} does not fit {want:?}"));
        }
        self.expect_out(ty, &in_shape)?;
        Ok(Op::IndexAdd { a, index, src, dim })
    }

    /// `pad(a, value, config)` with `(low, high, interior)` per dim, as the interpreter.
    pub(crate) fn pad(&self) -> R<Op> {
        self.arity(3)?;
        let (a, ty, in_shape) = self.tensor(0)?;
        let value = match (self.args.get(1), ty) {
            (Some(ArgView::Float(v)), Ty::F32 | Ty::F64) => Lit::F(*v),
            (Some(ArgView::Int(v)), Ty::F32 | Ty::F64) => Lit::F(*v as f64),
            (Some(ArgView::Bool(v)), Ty::F32 | Ty::F64) => Lit::F(f64::from(u8::from(*v))),
            (Some(ArgView::Int(v)), Ty::I64) => Lit::I(*v),
            (Some(ArgView::Bool(v)), Ty::B8) => Lit::B(*v),
            (other, ty) => return fail(format!("padding value {other:?} for {ty:?}")),
        };
        let value = match float_lit(Operand::Lit(value), ty) {
            Operand::Lit(l) if ty.is_float() => l,
            _ => value,
        };
        let config = self.ints(2)?;
        if config.len() != 3 * in_shape.len() {
            return fail(format!(
                "config needs 3 entries per dim ({}), got {}",
                3 * in_shape.len(),
                config.len()
            ));
        }
        let mut shape = Vec::with_capacity(in_shape.len());
        let mut triples = Vec::with_capacity(in_shape.len());
        for (c, &size) in config.chunks(3).zip(&in_shape) {
            let (lo, hi, interior) = (c[0], c[1], c[2]);
            let size = size as i128;
            let n =
                i128::from(lo) + i128::from(hi) + size + (size - 1).max(0) * i128::from(interior);
            if interior < 0 || n < 0 || n > i128::from(i64::MAX) {
                return fail(format!("config {config:?} does not fit {in_shape:?}"));
            }
            shape.push(n as usize);
            triples.push((lo, hi, interior));
        }
        self.expect_out(ty, &shape)?;
        Ok(Op::Pad {
            a,
            value,
            config: triples,
        })
    }

    /// `cat(dim, a, b, ...)`: parts of one dtype and rank, equal outside `dim`.
    pub(crate) fn cat(&self) -> R<Op> {
        if self.args.len() < 2 {
            return fail("cat needs a dim and at least one tensor".to_string());
        }
        let (_, ty, first) = self.tensor(1)?;
        let rank = first.len() as i64;
        let dim = match self.args.first() {
            Some(ArgView::Int(d)) if rank > 0 && (-rank..rank).contains(d) => {
                d.rem_euclid(rank) as usize
            }
            other => return fail(format!("dim must be in [-{rank}, {rank}), got {other:?}")),
        };
        let mut shape = first.clone();
        shape[dim] = 0;
        let mut parts = Vec::with_capacity(self.args.len() - 1);
        for i in 1..self.args.len() {
            let (v, t, s) = self.tensor(i)?;
            let fits = s.len() == first.len() && (0..s.len()).all(|k| k == dim || s[k] == first[k]);
            if t != ty || !fits {
                return fail(format!("cannot concatenate {ty:?}{first:?} and {t:?}{s:?}"));
            }
            shape[dim] += s[dim];
            parts.push(v);
        }
        self.expect_out(ty, &shape)?;
        Ok(Op::Cat { parts, dim })
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
