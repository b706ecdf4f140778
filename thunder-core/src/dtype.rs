//! Element types and PyTorch's type promotion.

pub use thunder_abi::DTypeCode as DType;

/// Category used by promotion: bool < integer < floating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    Bool,
    Int,
    Float,
}

pub fn category(d: DType) -> Category {
    match d {
        DType::Bool => Category::Bool,
        DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => Category::Int,
        DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Category::Float,
    }
}

/// The values an integer dtype holds (`None` for floats and bool).
pub fn int_range(d: DType) -> Option<(i64, i64)> {
    Some(match d {
        DType::U8 => (0, u8::MAX as i64),
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::I64 => (i64::MIN, i64::MAX),
        _ => return None,
    })
}

/// Wraps an integer into the width of `d`, as a cast does (`u8`: 300 becomes 44).
pub fn wrap_int(x: i64, d: DType) -> i64 {
    match d {
        DType::U8 => x as u8 as i64,
        DType::I8 => x as i8 as i64,
        DType::I16 => x as i16 as i64,
        DType::I32 => x as i32 as i64,
        _ => x,
    }
}

pub fn is_float(d: DType) -> bool {
    category(d) == Category::Float
}

pub fn is_low_precision(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

/// `torch.promote_types` for the dtypes we have.
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    match (category(a), category(b)) {
        (Category::Bool, _) => b,
        (_, Category::Bool) => a,
        (Category::Float, Category::Int) => a,
        (Category::Int, Category::Float) => b,
        (Category::Float, Category::Float) => match (a, b) {
            (F16, BF16) | (BF16, F16) => F32,
            _ => {
                if a.size_bytes() >= b.size_bytes() {
                    a
                } else {
                    b
                }
            }
        },
        (Category::Int, Category::Int) => {
            // u8 mixes with signed ints by going up one signed size, as in torch.
            let rank = |d: DType| match d {
                I8 => 1,
                I16 => 2,
                I32 => 3,
                I64 => 4,
                _ => 0,
            };
            match (a, b) {
                (U8, I8) | (I8, U8) => I16,
                (U8, other) | (other, U8) => other,
                _ => {
                    if rank(a) >= rank(b) {
                        a
                    } else {
                        b
                    }
                }
            }
        }
    }
}

/// One operand as type promotion sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operand {
    /// A tensor with at least one dimension.
    Tensor(DType),
    /// A 0-d tensor: it only decides the dtype when no dimensioned tensor has its category.
    ZeroDim(DType),
    /// A Python-style number: bool, int (i64) or float (the default float, f32).
    Scalar(Category),
}

/// `torch.result_type` over operands: dimensioned tensors, then 0-d tensors, then scalars,
/// where a lower class only matters if it brings a higher category.
pub fn result_type(operands: &[Operand]) -> Option<DType> {
    let fold = |pick: &dyn Fn(&Operand) -> Option<DType>| {
        operands.iter().filter_map(pick).reduce(promote_types)
    };
    let dim = fold(&|o| match o {
        Operand::Tensor(d) => Some(*d),
        _ => None,
    });
    let zero = fold(&|o| match o {
        Operand::ZeroDim(d) => Some(*d),
        _ => None,
    });
    let scalar = fold(&|o| match o {
        Operand::Scalar(Category::Bool) => Some(DType::Bool),
        Operand::Scalar(Category::Int) => Some(DType::I64),
        Operand::Scalar(Category::Float) => Some(DType::F32),
        _ => None,
    });
    let combined_low = combine(zero, scalar);
    combine(dim, combined_low)
}

/// torch's `combine_categories(higher, lower)`.
fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (None, l) => l,
        (h, None) => h,
        (Some(h), Some(l)) => {
            if is_float(h) {
                Some(h)
            } else if h == DType::Bool || is_float(l) {
                Some(promote_types(h, l))
            } else {
                Some(h)
            }
        }
    }
}

/// Whether every value of `narrow` is exactly a value of `wide`, so that converting to `wide`
/// and back gives the value unchanged (bf16 -> f32 -> bf16, i8 -> f16 -> i8, bool -> anything).
pub fn embeds_exactly(narrow: DType, wide: DType) -> bool {
    // Significand bits of a float dtype: the integers up to 2^bits are exact in it.
    fn significand_bits(d: DType) -> Option<u32> {
        match d {
            DType::BF16 => Some(8),
            DType::F16 => Some(11),
            DType::F32 => Some(24),
            DType::F64 => Some(53),
            _ => None,
        }
    }
    if narrow == wide || narrow == DType::Bool {
        return true;
    }
    match (category(narrow), category(wide)) {
        (Category::Float, Category::Float) => matches!(
            (narrow, wide),
            (DType::BF16 | DType::F16, DType::F32 | DType::F64) | (DType::F32, DType::F64)
        ),
        (Category::Int, Category::Int) => match (int_range(narrow), int_range(wide)) {
            (Some((lo, hi)), Some((wlo, whi))) => wlo <= lo && hi <= whi,
            _ => false,
        },
        (Category::Int, Category::Float) => match (int_range(narrow), significand_bits(wide)) {
            (Some((lo, hi)), Some(bits)) => {
                let limit = 1i128 << bits;
                -limit <= i128::from(lo) && i128::from(hi) <= limit
            }
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn promote_types_matches_torch_table() {
        // Values from torch.promote_types.
        assert_eq!(promote_types(U8, I8), I16);
        assert_eq!(promote_types(U8, I32), I32);
        assert_eq!(promote_types(Bool, U8), U8);
        assert_eq!(promote_types(I64, F16), F16);
        assert_eq!(promote_types(F16, BF16), F32);
        assert_eq!(promote_types(BF16, F64), F64);
        assert_eq!(promote_types(I16, I32), I32);
    }

    #[test]
    fn result_type_matches_torch() {
        // torch.result_type(torch.ones(2, dtype=torch.int32), 2.5) == float32
        assert_eq!(
            result_type(&[Operand::Tensor(I32), Operand::Scalar(Category::Float)]),
            Some(F32)
        );
        // int tensor with int scalar keeps the tensor's dtype
        assert_eq!(
            result_type(&[Operand::Tensor(U8), Operand::Scalar(Category::Int)]),
            Some(U8)
        );
        // f16 tensor with a f32 0-d tensor stays f16
        assert_eq!(
            result_type(&[Operand::Tensor(F16), Operand::ZeroDim(F32)]),
            Some(F16)
        );
        // i32 tensor with a f64 0-d tensor: category rises, default dtype of the 0-d kind
        assert_eq!(
            result_type(&[Operand::Tensor(I32), Operand::ZeroDim(F64)]),
            Some(F64)
        );
        // bool tensor with an int scalar becomes i64
        assert_eq!(
            result_type(&[Operand::Tensor(Bool), Operand::Scalar(Category::Int)]),
            Some(I64)
        );
        assert_eq!(
            result_type(&[Operand::ZeroDim(I16), Operand::Scalar(Category::Float)]),
            Some(F32)
        );
    }
}
