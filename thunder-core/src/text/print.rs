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
    crate::ir::lookup_symbol(id)
        .and_then(|s| s.signature)
        .and_then(|s| s.format_args(args, &fmt))
        .unwrap_or_else(|| args.iter().map(fmt).collect::<Vec<_>>().join(", "))
}

/// `t0 = prims.add(a, b)  # t0: "cpu f32[2]"`
pub fn bsym_line(trace: &Trace, bsym: &BoundSymbol) -> String {
    bsym_line_styled(trace, bsym, false)
}

/// `positional`: every argument by position in canonical order, as traces were printed before
/// signatures (still parsed); fixtures fingerprint this form so that it does not move when
/// the printing of keyword arguments does.
fn bsym_line_styled(trace: &Trace, bsym: &BoundSymbol, positional: bool) -> String {
    let args = if positional {
        let items: Vec<String> = bsym.args.iter().map(|a| format_arg(trace, a)).collect();
        items.join(", ")
    } else {
        format_call_args(trace, bsym.sym.id, &bsym.args)
    };
    format!(
        "{} = {}({})  # {}",
        targets(trace, bsym),
        bsym.sym.id,
        args,
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
    print_lines_styled(out, trace, bsym, indent, comment, false)
}

fn print_lines_styled(
    out: &mut String,
    trace: &Trace,
    bsym: &BoundSymbol,
    indent: usize,
    comment: bool,
    positional: bool,
) {
    let pad = " ".repeat(indent);
    let hash = if comment { "# " } else { "" };
    let _ = writeln!(
        out,
        "{pad}{hash}{}",
        bsym_line_styled(trace, bsym, positional)
    );
    for sub in &bsym.subsymbols {
        print_lines_styled(out, trace, sub, indent + 2, true, positional);
    }
}

pub fn print_trace(trace: &Trace) -> String {
    print_trace_styled(trace, false)
}

/// The trace with every call's arguments by position, in canonical order (the form traces
/// had before keyword arguments; it still parses). Fixtures fingerprint it.
pub fn print_trace_positional(trace: &Trace) -> String {
    print_trace_styled(trace, true)
}

fn print_trace_styled(trace: &Trace, positional: bool) -> String {
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
        print_lines_styled(&mut out, trace, bsym, 2, false, positional);
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
