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
//! - `sum(a, dims)`, `amax(a, dims)`: the listed dims are removed
//! - `matmul(a, b)`: `[..., m, k] @ [..., k, n]` with equal batch dims
//! - `full(shape, fill_value, device, dtype)`
//! - `iota(length, start, step, device, dtype)`: `[start, start + step, ...]`, `length` values

/// The family a prim belongs to; shared meta rules and tags hang off it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrimClass {
    /// Elementwise, one tensor in, same dtype out.
    Unary,
    /// Elementwise, two operands of one dtype, same dtype out.
    Binary,
    /// Elementwise comparison, bool out.
    Compare,
    /// Elementwise test of one tensor, bool out.
    Predicate,
    Where,
    Convert,
    Shape,
    Reduction,
    Matmul,
    Factory,
}

macro_rules! prim_table {
    ($( $variant:ident => $name:literal, $class:ident; )*) => {
        /// A primitive operation. See the module docs for signatures.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Prim { $($variant),* }

        impl Prim {
            pub const ALL: &'static [Prim] = &[$(Prim::$variant),*];

            /// Name without the namespace, e.g. `add`.
            pub const fn name(self) -> &'static str {
                match self { $(Prim::$variant => $name),* }
            }

            /// Stable id, e.g. `prims.add`.
            pub const fn id(self) -> &'static str {
                match self { $(Prim::$variant => concat!("prims.", $name)),* }
            }

            pub const fn class(self) -> PrimClass {
                match self { $(Prim::$variant => PrimClass::$class),* }
            }
        }
    };
}

prim_table! {
    Neg => "neg", Unary;
    Abs => "abs", Unary;
    Exp => "exp", Unary;
    Exp2 => "exp2", Unary;
    Expm1 => "expm1", Unary;
    Log => "log", Unary;
    Log1p => "log1p", Unary;
    Log2 => "log2", Unary;
    Log10 => "log10", Unary;
    Sqrt => "sqrt", Unary;
    Rsqrt => "rsqrt", Unary;
    Tanh => "tanh", Unary;
    Sin => "sin", Unary;
    Cos => "cos", Unary;
    Tan => "tan", Unary;
    Asin => "asin", Unary;
    Acos => "acos", Unary;
    Atan => "atan", Unary;
    Sinh => "sinh", Unary;
    Cosh => "cosh", Unary;
    Asinh => "asinh", Unary;
    Acosh => "acosh", Unary;
    Atanh => "atanh", Unary;
    Erf => "erf", Unary;
    Erfc => "erfc", Unary;
    Erfinv => "erfinv", Unary;
    Lgamma => "lgamma", Unary;
    Digamma => "digamma", Unary;
    Reciprocal => "reciprocal", Unary;
    Floor => "floor", Unary;
    Ceil => "ceil", Unary;
    Round => "round", Unary;
    Trunc => "trunc", Unary;
    Signbit => "signbit", Predicate;
    Add => "add", Binary;
    Sub => "sub", Binary;
    Mul => "mul", Binary;
    Div => "div", Binary;
    Pow => "pow", Binary;
    Maximum => "maximum", Binary;
    Minimum => "minimum", Binary;
    Remainder => "remainder", Binary;
    Fmod => "fmod", Binary;
    FloorDivide => "floor_divide", Binary;
    Atan2 => "atan2", Binary;
    BitwiseAnd => "bitwise_and", Binary;
    BitwiseOr => "bitwise_or", Binary;
    BitwiseXor => "bitwise_xor", Binary;
    BitwiseLeftShift => "bitwise_left_shift", Binary;
    BitwiseRightShift => "bitwise_right_shift", Binary;
    Eq => "eq", Compare;
    Ne => "ne", Compare;
    Lt => "lt", Compare;
    Le => "le", Compare;
    Gt => "gt", Compare;
    Ge => "ge", Compare;
    Where => "where", Where;
    ConvertElementType => "convert_element_type", Convert;
    BroadcastInDim => "broadcast_in_dim", Shape;
    Reshape => "reshape", Shape;
    Transpose => "transpose", Shape;
    Sum => "sum", Reduction;
    Amax => "amax", Reduction;
    Matmul => "matmul", Matmul;
    Full => "full", Factory;
    Iota => "iota", Factory;
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
