//! Printing traces. Names are the trace's own, so output is deterministic.

use crate::ir::{Arg, BoundSymbol, Trace};
use std::fmt::Write;

pub fn format_float(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else {
        // Debug formatting is the shortest text that parses back to the same bits.
        format!("{x:?}")
    }
}

pub fn format_arg(trace: &Trace, arg: &Arg) -> String {
    match arg {
        Arg::Value(v) => trace.name(*v).to_string(),
        other => format_literal(other),
    }
}

/// A literal argument as Python source (`True`, `1e-05`, `"none"`, `dtypes.f32`); a tensor
/// (which has no literal form) prints as `<tensor>`.
pub fn format_literal(arg: &Arg) -> String {
    match arg {
        Arg::Value(_) => "<tensor>".into(),
        Arg::Int(i) => i.to_string(),
        Arg::Float(x) => format_float(*x),
        Arg::Bool(true) => "True".into(),
        Arg::Bool(false) => "False".into(),
        Arg::Ints(v) => {
            let items: Vec<String> = v.iter().map(i64::to_string).collect();
            format!("[{}]", items.join(", "))
        }
        Arg::DType(d) => format!("dtypes.{}", d.short_name()),
        Arg::Device(d) => super::device_literal(*d),
        Arg::Str(s) => format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")),
        Arg::None => "None".into(),
    }
}

fn targets(trace: &Trace, bsym: &BoundSymbol) -> String {
    let names: Vec<&str> = bsym.outputs.iter().map(|&v| trace.name(v)).collect();
    names.join(", ")
}

fn annotations(trace: &Trace, bsym: &BoundSymbol) -> String {
    let items: Vec<String> = bsym
        .outputs
        .iter()
        .map(|&v| format!("{}: \"{}\"", trace.name(v), trace.ty(v)))
        .collect();
    items.join(", ")
}

/// A call's arguments: by the op's signature where it has one (keyword-only parameters as
/// `name=value`, tensor lists in brackets), otherwise positionally.
pub fn format_call_args(trace: &Trace, id: &str, args: &[Arg]) -> String {
    let fmt = |a: &Arg| format_arg(trace, a);
    crate::ltorch::signature(id)
        .and_then(|s| s.format_args(args, &fmt))
        .unwrap_or_else(|| args.iter().map(fmt).collect::<Vec<_>>().join(", "))
}

/// `t0 = prims.add(a, b)  # t0: "cpu f32[2]"`
pub fn bsym_line(trace: &Trace, bsym: &BoundSymbol) -> String {
    format!(
        "{} = {}({})  # {}",
        targets(trace, bsym),
        bsym.sym.id,
        format_call_args(trace, bsym.sym.id, &bsym.args),
        annotations(trace, bsym)
    )
}

/// A bound symbol and, as indented comments, its subsymbols.
pub fn print_bsym_lines(
    out: &mut String,
    trace: &Trace,
    bsym: &BoundSymbol,
    indent: usize,
    comment: bool,
) {
    let pad = " ".repeat(indent);
    let hash = if comment { "# " } else { "" };
    let _ = writeln!(out, "{pad}{hash}{}", bsym_line(trace, bsym));
    for sub in &bsym.subsymbols {
        print_bsym_lines(out, trace, sub, indent + 2, true);
    }
}

pub fn print_trace(trace: &Trace) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Constructed by {}", trace.provenance);
    let _ = writeln!(
        out,
        "def {}({}):",
        trace.fn_name,
        trace.input_names().join(", ")
    );
    for &v in &trace.inputs {
        let _ = writeln!(out, "  # {}: \"{}\"", trace.name(v), trace.ty(v));
    }
    for bsym in &trace.bsyms {
        print_bsym_lines(&mut out, trace, bsym, 2, false);
    }
    let _ = writeln!(out, "  return {}", format_return(trace));
    out
}

pub fn format_return(trace: &Trace) -> String {
    let names: Vec<&str> = trace.outputs.iter().map(|&v| trace.name(v)).collect();
    match names.len() {
        1 => format!("({},)", names[0]),
        _ => format!("({})", names.join(", ")),
    }
}
