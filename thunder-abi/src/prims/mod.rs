//! The primitive vocabulary, declared once.
//!
//! Prims are the contract between the host and every executor: the host's meta rules, grad
//! rules and printer, and each executor's kernels, `match` on [`Prim`] exhaustively, so adding a
//! row here does not compile until every layer has decided what to do with it. What crosses the
//! ABI is the stable string id (`prims.add`), never the enum's numbering.
//!
//! Positional signatures (`a`, `b` are tensors; a binary op, comparison or `where` may take one
//! scalar literal in place of a tensor; a number beside a float tensor is first rounded to that
//! tensor's dtype, as torch casts a Python scalar, so `f32 * 1.01` is exact f32 arithmetic):
//! - unary and predicates (`signbit`, bool out) `(a)`; binary and comparisons `(a, b)`; `where(pred, a, b)`
//! - `convert_element_type(a, dtype)`
//! - `broadcast_in_dim(a, shape, broadcast_dims)`; `reshape(a, shape)`; `transpose(a, perm)`
//! - `slice(a, start, end, strides)` (lax.slice: per dim, `0 <= start <= end <= size`,
//!   stride >= 1); `pad(a, value, config)` with `config` the flat list `[low0, high0,
//!   interior0, low1, ...]` (lax.pad: low/high may be negative, interior >= 0); `flip(a, dims)`
//! - `cat(dim, t0, t1, ...)`: the tensors are variadic positional values after the dim (the
//!   IR has no tensor-list argument), at least one, equal except along `dim`
//! - `take(a, index, dim)` (index_select: `index` 1-D integer); `take_along_axis(a, index, dim)`
//!   (torch.gather: `index` of `a`'s rank, output of `index`'s shape); `scatter_add(a, index,
//!   src, dim)` and `index_add(a, index, src, dim)` (torch semantics, output of `a`'s shape).
//!   An index outside `[0, size)` (negative ones included) is a run-time error
//! - `sum(a, dims)`, `amax(a, dims)`, `prod(a, dims)`, `amin(a, dims)`: the listed dims are
//!   removed (`amax`/`amin` refuse a reduced dim of size 0; NaN propagates)
//! - `argmax(a, dim)`, `argmin(a, dim)`: i64 index of the first maximum (minimum) along `dim`,
//!   which is removed; a NaN counts as the extreme, as in torch
//! - `var_mean(a, dims, correction)`: two outputs, the variance (sum of squared deviations
//!   divided by `N - correction`) and the mean over `dims`, which are removed
//! - `cumsum(a, dim)`: inclusive running sum along `dim`, same shape and dtype
//! - `topk(a, k, dim, largest, sorted)`: two outputs, the `k` largest (smallest) values along
//!   `dim` and their i64 indices; `sort(a, dim, descending, stable)`: the sorted values and the
//!   i64 permutation. NaN sorts above every number; ties keep index order
//! - `convolution(a, weight, bias, stride, padding, dilation, groups)`: `a` `[N, C_in, *S]`,
//!   `weight` `[C_out, C_in / groups, *K]`, `bias` `[C_out]` or None, one non-b8 dtype (ints
//!   wrap, as torch's integer kernels); `stride`, `padding`
//!   (zeros, both sides) and `dilation` one int per spatial dim. Output `[N, C_out, *O]` with
//!   `O = (S + 2 * padding - dilation * (K - 1) - 1) / stride + 1` (cross-correlation, as torch)
//! - `uniform(shape, low, high, seed, offset, device, dtype)`, `normal(shape, mean, std, seed,
//!   offset, device, dtype)`: float dtypes; `seed` and `offset` are ints read as u64 (two's
//!   complement). Every executor must produce these exact numbers (then rounded once to
//!   `dtype`), so the mapping is part of the contract. With Philox4x32-10 as in Random123
//!   (multipliers 0xD2511F53, 0xCD9E8D57; key increments 0x9E3779B9, 0xBB67AE85; 10 rounds):
//!   - key `(k0, k1) = (seed mod 2^32, seed >> 32)`;
//!   - element `i` (row-major) uses block `b = offset + i / 2` (u64, wrapping), counter
//!     `(b mod 2^32, b >> 32, 0, 0)`, and the output words `x = w[2 * (i % 2)]`,
//!     `y = w[2 * (i % 2) + 1]`;
//!   - uniform: `u = ((x >> 5) * 2^26 + (y >> 6)) * 2^-53` in `[0, 1)` (53 bits), value
//!     `low + (high - low) * u` in f64 (rounding to a narrower dtype can reach `high`, with
//!     probability about 2^-25 in f32);
//!   - normal (Box-Muller, cosine branch): `u1 = (x + 1) * 2^-32` in `(0, 1]`,
//!     `u2 = y * 2^-32`, value `mean + std * sqrt(-2 ln u1) * cos(2 pi u2)` in f64.
//!
//!   A call with `n` elements consumes `ceil(n / 2)` blocks: the next independent call uses
//!   `offset + ceil(n / 2)`.
//! - `matmul(a, b)`: `[..., m, k] @ [..., k, n]` with equal batch dims
//! - `full(shape, fill_value, device, dtype)`
//! - `iota(length, start, step, device, dtype)`: `[start, start + step, ...]`, `length` values

pub mod elementwise;
pub mod special;

pub use elementwise::{BinaryRule, CudaSpelling, Domain, Elementwise, UnaryRule};

macro_rules! prim_table {
    ($(
        $(#[doc = $cdoc:literal])*
        $class:ident => $sub:ident { $( $variant:ident => $name:literal, )* }
    )*) => {
        /// The family a prim belongs to; shared meta rules and tags hang off it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum PrimClass { $( $(#[doc = $cdoc])* $class, )* }

        /// A primitive operation. See the module docs for signatures.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Prim { $( $( $variant, )* )* }

        /// A prim with its family: `match prim.kind()` then `match` on the family's own enum
        /// is exhaustive at both levels, so a new prim fails to compile in every layer that
        /// has not said what it does with it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum PrimKind { $( $class($sub), )* }

        $(
            #[doc = concat!("The prims of class [`PrimClass::", stringify!($class), "`].")]
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
            pub enum $sub { $( $variant, )* }

            impl $sub {
                pub const ALL: &'static [$sub] = &[$($sub::$variant),*];

                pub const fn prim(self) -> Prim {
                    match self { $($sub::$variant => Prim::$variant),* }
                }

                pub const fn name(self) -> &'static str {
                    self.prim().name()
                }

                pub const fn id(self) -> &'static str {
                    self.prim().id()
                }

                #[doc = concat!("`prim` if it is of class [`PrimClass::", stringify!($class), "`].")]
                #[allow(unreachable_patterns)] // a family that holds every prim
                pub const fn of(prim: Prim) -> Option<$sub> {
                    match prim.kind() {
                        PrimKind::$class(p) => Some(p),
                        _ => None,
                    }
                }
            }

            impl From<$sub> for Prim {
                fn from(p: $sub) -> Prim {
                    p.prim()
                }
            }
        )*

        impl Prim {
            pub const ALL: &'static [Prim] = &[$($(Prim::$variant,)*)*];

            /// Name without the namespace, e.g. `add`.
            pub const fn name(self) -> &'static str {
                match self { $($(Prim::$variant => $name,)*)* }
            }

            /// Stable id, e.g. `prims.add`.
            pub const fn id(self) -> &'static str {
                match self { $($(Prim::$variant => concat!("prims.", $name),)*)* }
            }

            pub const fn kind(self) -> PrimKind {
                match self { $($(Prim::$variant => PrimKind::$class($sub::$variant),)*)* }
            }

            pub const fn class(self) -> PrimClass {
                match self { $($(Prim::$variant => PrimClass::$class,)*)* }
            }
        }
    };
}

prim_table! {
    /// Elementwise, one tensor in, same dtype out.
    Unary => UnaryPrim {
        Neg => "neg",
        Abs => "abs",
        Exp => "exp",
        Exp2 => "exp2",
        Expm1 => "expm1",
        Log => "log",
        Log1p => "log1p",
        Log2 => "log2",
        Log10 => "log10",
        Sqrt => "sqrt",
        Rsqrt => "rsqrt",
        Tanh => "tanh",
        Sin => "sin",
        Cos => "cos",
        Tan => "tan",
        Asin => "asin",
        Acos => "acos",
        Atan => "atan",
        Sinh => "sinh",
        Cosh => "cosh",
        Asinh => "asinh",
        Acosh => "acosh",
        Atanh => "atanh",
        Erf => "erf",
        Erfc => "erfc",
        Erfinv => "erfinv",
        Lgamma => "lgamma",
        Digamma => "digamma",
        Trigamma => "trigamma",
        Reciprocal => "reciprocal",
        Floor => "floor",
        Ceil => "ceil",
        Round => "round",
        Trunc => "trunc",
    }
    /// Elementwise test of one tensor, bool out.
    Predicate => PredicatePrim {
        Signbit => "signbit",
    }
    /// Elementwise, two operands of one dtype, same dtype out.
    Binary => BinaryPrim {
        Add => "add",
        Sub => "sub",
        Mul => "mul",
        Div => "div",
        Pow => "pow",
        Maximum => "maximum",
        Minimum => "minimum",
        Remainder => "remainder",
        Fmod => "fmod",
        FloorDivide => "floor_divide",
        Atan2 => "atan2",
        Hypot => "hypot",
        BitwiseAnd => "bitwise_and",
        BitwiseOr => "bitwise_or",
        BitwiseXor => "bitwise_xor",
        BitwiseLeftShift => "bitwise_left_shift",
        BitwiseRightShift => "bitwise_right_shift",
    }
    /// Elementwise comparison, bool out.
    Compare => ComparePrim {
        Eq => "eq",
        Ne => "ne",
        Lt => "lt",
        Le => "le",
        Gt => "gt",
        Ge => "ge",
    }
    Where => WherePrim {
        Where => "where",
    }
    Convert => ConvertPrim {
        ConvertElementType => "convert_element_type",
    }
    Shape => ShapePrim {
        BroadcastInDim => "broadcast_in_dim",
        Reshape => "reshape",
        Transpose => "transpose",
    }
    /// Data movement by ranges and indices.
    Indexing => IndexingPrim {
        Slice => "slice",
        Pad => "pad",
        Cat => "cat",
        Flip => "flip",
        Take => "take",
        TakeAlongAxis => "take_along_axis",
        ScatterAdd => "scatter_add",
        IndexAdd => "index_add",
    }
    Reduction => ReductionPrim {
        Sum => "sum",
        Amax => "amax",
        Prod => "prod",
        Amin => "amin",
        Argmax => "argmax",
        Argmin => "argmin",
        VarMean => "var_mean",
    }
    /// Running reduction along one dim, same shape out.
    Scan => ScanPrim {
        Cumsum => "cumsum",
    }
    /// Values and i64 indices along one dim (topk, sort).
    Sort => SortPrim {
        Topk => "topk",
        Sort => "sort",
    }
    /// N-d convolution.
    Conv => ConvPrim {
        Convolution => "convolution",
    }
    /// Counter-based random numbers (Philox4x32-10) from an explicit seed and offset.
    Random => RandomPrim {
        Uniform => "uniform",
        Normal => "normal",
    }
    Matmul => MatmulPrim {
        Matmul => "matmul",
    }
    Factory => FactoryPrim {
        Full => "full",
        Iota => "iota",
    }
}

impl Prim {
    pub fn from_id(id: &str) -> Option<Prim> {
        let name = id.strip_prefix("prims.")?;
        Prim::ALL.iter().copied().find(|p| p.name() == name)
    }

    pub fn is_elementwise(self) -> bool {
        matches!(
            self.class(),
            PrimClass::Unary
                | PrimClass::Binary
                | PrimClass::Compare
                | PrimClass::Predicate
                | PrimClass::Where
                | PrimClass::Convert
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &p in Prim::ALL {
            assert_eq!(Prim::from_id(p.id()), Some(p));
            assert!(seen.insert(p.id()));
        }
        assert_eq!(Prim::from_id("prims.nope"), None);
        assert_eq!(Prim::from_id("ltorch.add"), None);
    }
}
