//! C spellings of the trace's dtypes, values and conversions, shared by every kernel shape the
//! code generator writes: storage vs compute types (f16/bf16 are computed in f32 and rounded back
//! after every op, as the interpreter rounds) and literals that round-trip exactly.

use crate::plan::Literal;
use thunder_abi::DTypeCode;

pub(crate) fn ctype(d: DTypeCode) -> &'static str {
    match d {
        DTypeCode::Bool => "bool",
        DTypeCode::U8 => "unsigned char",
        DTypeCode::I8 => "signed char",
        DTypeCode::I16 => "short",
        DTypeCode::I32 => "int",
        DTypeCode::I64 => "i64_t",
        DTypeCode::F16 | DTypeCode::BF16 | DTypeCode::F32 => "float",
        DTypeCode::F64 => "double",
    }
}

/// The C type a value of `dtype` is stored as.
pub(crate) fn storage(d: DTypeCode) -> &'static str {
    match d {
        DTypeCode::Bool => "u8_t",
        DTypeCode::F16 | DTypeCode::BF16 => "u16_t",
        other => ctype(other),
    }
}

pub(crate) fn load_expr(d: DTypeCode, raw: &str) -> String {
    match d {
        DTypeCode::Bool => format!("({raw} != 0)"),
        DTypeCode::F16 => format!("f16_to_f32({raw})"),
        DTypeCode::BF16 => format!("bf16_to_f32({raw})"),
        _ => raw.to_string(),
    }
}

pub(crate) fn store_expr(d: DTypeCode, v: &str) -> String {
    match d {
        DTypeCode::Bool => format!("(u8_t)({v} ? 1 : 0)"),
        DTypeCode::F16 => format!("f32_to_f16({v})"),
        // Every f16/bf16 node's f32 value is a value of its dtype (loads are exact; arithmetic,
        // conversions, reductions, iotas and selections of literals are rounded): a bf16's
        // bits are its f32's top half. One instruction where rounding again takes two, and
        // three with the packing after: the bf16 rows' output passes are bound by
        // instructions, not bytes.
        DTypeCode::BF16 => format!("bf16_bits({v})"),
        _ => v.to_string(),
    }
}

/// Rounds a value computed in f32 to the node's dtype.
pub(crate) fn rounded(d: DTypeCode, expr: String) -> String {
    match d {
        DTypeCode::F16 => format!("round_f16({expr})"),
        DTypeCode::BF16 => format!("round_bf16({expr})"),
        _ => expr,
    }
}

/// The device functions the kernel's math calls (digamma, trigamma), each once.
pub(crate) fn in_bounds(bounds: &[(i64, i64)]) -> String {
    let terms: Vec<String> = bounds
        .iter()
        .enumerate()
        .map(|(d, (lo, hi))| format!("i{d} >= {lo} && i{d} < {hi}"))
        .collect();
    if terms.is_empty() {
        "true".into()
    } else {
        format!("({})", terms.join(" && "))
    }
}

pub(crate) fn is_double(d: DTypeCode) -> bool {
    d == DTypeCode::F64
}

pub(crate) fn float_literal(x: f64, double: bool) -> String {
    if double {
        if x.is_finite() {
            format!("{x:?}")
        } else {
            format!("__longlong_as_double({:#018x}LL)", x.to_bits())
        }
    } else {
        let f = x as f32;
        if f.is_finite() {
            format!("{f:?}f")
        } else {
            format!("__int_as_float({:#010x})", f.to_bits())
        }
    }
}

pub(crate) fn literal(l: &Literal, at: DTypeCode) -> String {
    match *l {
        Literal::Float(x) if at.is_float() => float_literal(x, is_double(at)),
        Literal::Float(x) => float_literal(x, true),
        Literal::Int(i) if at.is_float() => float_literal(i as f64, is_double(at)),
        Literal::Int(i) => format!("(({}){i}LL)", ctype(at)),
        Literal::Bool(b) => if b { "true" } else { "false" }.to_string(),
    }
}

pub(crate) fn convert(from: DTypeCode, to: DTypeCode, x: &str) -> String {
    match to {
        _ if from == to => x.to_string(),
        DTypeCode::Bool => format!("({x} != 0)"),
        DTypeCode::F16 if from == DTypeCode::F64 => format!("f16_to_f32(f64_to_f16({x}))"),
        DTypeCode::F16 => format!("round_f16((float){x})"),
        DTypeCode::BF16 => format!("round_bf16((float){x})"),
        other => format!("(({}){x})", ctype(other)),
    }
}
