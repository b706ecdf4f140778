//! Strided views of buffers, in elements: how broadcasts, transposes and reshapes become index
//! arithmetic instead of copies, and how a loop nest is compacted before it runs.

/// Element offset and per-dim strides of a value's row-major index into its buffer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Layout {
    pub(crate) offset: i64,
    pub(crate) strides: Vec<i64>,
}

pub(crate) use thunder_abi::strides::row_major;

impl Layout {
    pub(crate) fn contiguous(shape: &[usize]) -> Layout {
        Layout {
            offset: 0,
            strides: row_major(shape),
        }
    }

    /// Input dim `i` becomes output dim `dims[i]`; size-1 input dims repeat (stride 0).
    pub(crate) fn broadcast(&self, in_shape: &[usize], out_rank: usize, dims: &[usize]) -> Layout {
        let mut strides = vec![0i64; out_rank];
        for ((&size, &stride), &d) in in_shape.iter().zip(&self.strides).zip(dims) {
            if size != 1 {
                strides[d] = stride;
            }
        }
        Layout {
            offset: self.offset,
            strides,
        }
    }

    /// Output dim `i` is input dim `perm[i]`.
    pub(crate) fn transpose(&self, perm: &[usize]) -> Layout {
        Layout {
            offset: self.offset,
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
        }
    }

    /// The layout `x` whose `x.transpose(perm)` is `self`: the source of a transposed view.
    pub(crate) fn untranspose(&self, perm: &[usize]) -> Layout {
        let mut strides = vec![0i64; perm.len()];
        for (&p, &s) in perm.iter().zip(&self.strides) {
            strides[p] = s;
        }
        Layout {
            offset: self.offset,
            strides,
        }
    }

    /// The same elements seen with shape `to`, when strides can express it (PyTorch's
    /// `computeStride`); `None` when the reshape would need a copy.
    pub(crate) fn reshape(&self, from: &[usize], to: &[usize]) -> Option<Layout> {
        thunder_abi::strides::reshape(from, &self.strides, to).map(|strides| Layout {
            offset: self.offset,
            strides,
        })
    }
}

/// Strides of every accessor over one iteration shape.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Nest {
    pub(crate) shape: Vec<usize>,
    pub(crate) strides: Vec<Vec<i64>>,
}

impl Nest {
    /// Drops size-1 dims and merges neighbours that every accessor steps through as one dim,
    /// so a contiguous elementwise loop becomes a single dim whatever its rank. Never empty:
    /// a 0-d loop becomes one dim of size 1.
    pub(crate) fn compact(mut self) -> Nest {
        let keep: Vec<usize> = (0..self.shape.len())
            .filter(|&d| self.shape[d] != 1)
            .collect();
        let mut shape: Vec<usize> = keep.iter().map(|&d| self.shape[d]).collect();
        let mut strides: Vec<Vec<i64>> = self
            .strides
            .iter()
            .map(|s| keep.iter().map(|&d| s[d]).collect())
            .collect();
        let mut d = shape.len();
        while d >= 2 {
            d -= 1;
            // Merge dim d into d - 1 when (d - 1) steps exactly over all of dim d.
            let inner = shape[d] as i64;
            if strides.iter().all(|s| s[d - 1] == s[d] * inner) {
                shape[d - 1] *= shape[d];
                shape.remove(d);
                for s in &mut strides {
                    let inner_stride = s[d];
                    s[d - 1] = inner_stride;
                    s.remove(d);
                }
            }
        }
        if shape.is_empty() {
            shape.push(1);
            for s in &mut strides {
                s.push(0);
            }
        }
        self.shape = shape;
        self.strides = strides;
        self
    }
}
