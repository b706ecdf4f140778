//! Parsing trace text. Each statement is bound again through its symbol (prims run their meta,
//! composites their decomposition), so a parsed trace is checked like a traced one. Subsymbol
//! comment lines, when present, must match the decomposition; they give its values their names.

use super::lexer::{lex, Tok, Token};
use super::parse_type;
use super::syntax::{
    parse_annotations, parse_call, parse_literal_or_name, parse_return, perr, ArgExpr, Call, Cursor,
};
use crate::error::{Error, Result};
use crate::ir::signature::suggest;
use crate::ir::{lookup_symbol, symbol_ids, Arg, BoundSymbol, TensorType, Trace, Value};
use crate::ir::{CallError, Given};
use crate::tensor::Tensor;
use crate::trace_ctx::{self, bind, trace_with};
use std::collections::{HashMap, HashSet};

#[derive(Debug)]
struct Statement {
    call: Call,
    /// Subsymbol lines written under it, with their depth (1 = direct child).
    subs: Vec<(usize, Call)>,
}

struct Parsed {
    provenance: String,
    fn_name: String,
    params: Vec<(String, TensorType)>,
    statements: Vec<Statement>,
    returns: Vec<(String, usize, usize)>,
}

fn parse_structure(text: &str, given: &HashMap<String, TensorType>) -> Result<Parsed> {
    let mut provenance = "Parsed text".to_string();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l)).peekable();
    // Header: comments and blank lines before `def`.
    let (def_line, def_text) = loop {
        match lines.next() {
            None => {
                return Err(perr(
                    text.lines().count().max(1),
                    1,
                    "expected `def NAME(PARAMS):`, found the end of the text",
                ))
            }
            Some((_, l)) if l.trim().is_empty() => {}
            Some((_, l)) if l.trim_start().starts_with('#') => {
                if let Some(p) = l.trim_start().strip_prefix("# Constructed by ") {
                    provenance = p.trim().to_string();
                }
            }
            Some((n, l)) => break (n, l),
        }
    };
    let toks = lex(def_text, def_line)?;
    let mut c = Cursor {
        toks: &toks,
        pos: 0,
        line: def_line,
        end_col: def_text.len() + 1,
        nested: Vec::new(),
    };
    let (kw, kw_col) = c.ident("`def`")?;
    if kw != "def" {
        return Err(perr(
            def_line,
            kw_col,
            format!("expected `def`, found `{kw}`"),
        ));
    }
    let (fn_name, _) = c.ident("a function name")?;
    c.expect(&Tok::LParen, "`(`")?;
    let mut param_names: Vec<(String, usize)> = Vec::new();
    if c.peek() == Some(&Tok::RParen) {
        c.next();
    } else {
        loop {
            param_names.push(c.ident("a parameter name")?);
            let col = c.col();
            match c.next() {
                Some(Tok::Comma) => {}
                Some(Tok::RParen) => break,
                _ => return Err(perr(def_line, col, "expected `,` or `)`")),
            }
        }
    }
    c.expect(&Tok::Colon, "`:` after the parameters")?;

    let mut types: HashMap<String, TensorType> = HashMap::new();
    let mut statements: Vec<Statement> = Vec::new();
    let mut returns = None;
    let mut body_indent = None;
    for (n, raw) in lines {
        let trimmed = raw.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        let indent = raw.len() - trimmed.len();
        let col = indent + 1;
        if indent == 0 {
            return Err(perr(n, 1, "expected an indented line in the function body"));
        }
        let body = *body_indent.get_or_insert(indent);
        if returns.is_some() {
            if trimmed.starts_with('#') {
                continue;
            }
            return Err(perr(n, col, "nothing may follow `return`"));
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            let comment = comment.trim();
            if statements.is_empty() && indent == body {
                if let Some((name, ty)) = parse_annotations(comment).into_iter().next() {
                    if param_names.iter().any(|(p, _)| *p == name) {
                        let t = parse_type(&ty).ok_or_else(|| {
                            perr(
                                n,
                                col,
                                format!("invalid type annotation \"{ty}\" for `{name}`"),
                            )
                        })?;
                        types.insert(name, t);
                    }
                    continue;
                }
            }
            if indent > body && comment.contains('=') {
                if let Some(stmt) = statements.last_mut() {
                    // Column of the comment's text within the raw line.
                    let offset = raw.len() - comment.len();
                    let toks = lex(comment, n)?;
                    let toks: Vec<Token> = toks
                        .into_iter()
                        .map(|t| Token {
                            column: t.column + offset,
                            ..t
                        })
                        .collect();
                    let mut calls = parse_call(&toks, n, raw.len() + 1)?;
                    if calls.len() > 1 {
                        return Err(perr(n, col, "a subsymbol line holds one call"));
                    }
                    if let Some(call) = calls.pop() {
                        stmt.subs.push(((indent - body) / 2, call));
                    }
                }
            }
            continue;
        }
        let toks = lex(raw, n)?;
        if matches!(toks.first(), Some(Token { tok: Tok::Ident(k), .. }) if k == "return") {
            let (names, nested) = parse_return(&toks, n, raw.len() + 1)?;
            statements.extend(nested.into_iter().map(|call| Statement {
                call,
                subs: Vec::new(),
            }));
            returns = Some(names);
            continue;
        }
        if indent != body {
            return Err(perr(
                n,
                col,
                format!("unexpected indentation (expected {body} spaces)"),
            ));
        }
        for call in parse_call(&toks, n, raw.len() + 1)? {
            statements.push(Statement {
                call,
                subs: Vec::new(),
            });
        }
    }
    let returns =
        returns.ok_or_else(|| perr(text.lines().count(), 1, "the function has no `return`"))?;
    let mut params = Vec::new();
    for (name, col) in param_names {
        let ty = match (types.remove(&name), given.get(&name)) {
            (Some(written), Some(g)) => {
                let same = written.shape == g.shape
                    && written.dtype == g.dtype
                    && written.device == g.device;
                if !same {
                    return Err(Error::Input {
                        name,
                        message: format!(
                            "the program's annotation says \"{written}\" but the given input is \"{g}\""
                        ),
                    });
                }
                written
            }
            (Some(written), None) => written,
            (None, Some(g)) => g.clone(),
            (None, None) => {
                return Err(perr(
                    def_line,
                    col,
                    format!(
                    "parameter `{name}` has no type: give it as an input (`-i {name}=FILE.npy`) \
                         or annotate it (`# {name}: \"cpu f32[2, 3]\"`)"
                ),
                ))
            }
        };
        params.push((name, ty));
    }
    Ok(Parsed {
        provenance,
        fn_name,
        params,
        statements,
        returns,
    })
}

fn resolve(
    call: &Call,
    expr: &ArgExpr,
    col: usize,
    env: &HashMap<String, Tensor>,
) -> Result<Given> {
    let lookup = |name: &str, col: usize| -> Result<Arg> {
        env.get(name)
            .map(|t| Arg::Value(t.value()))
            .ok_or_else(|| unknown_name(call.line, col, name, env))
    };
    Ok(match expr {
        ArgExpr::Lit(a) => Given::One(a.clone()),
        ArgExpr::Name(name) => Given::One(lookup(name, col)?),
        ArgExpr::Names(names) => Given::Tensors(
            names
                .iter()
                .map(|(n, c)| lookup(n, *c))
                .collect::<Result<Vec<_>>>()?,
        ),
    })
}

fn unknown_name(line: usize, col: usize, name: &str, env: &HashMap<String, Tensor>) -> Error {
    let hint = suggest(name, env.keys().map(String::as_str))
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default();
    perr(line, col, format!("unknown name `{name}`{hint}"))
}

/// The call's arguments in the op's canonical order: bound through its signature (keywords,
/// torch's defaults) when it has one, positional otherwise.
fn call_args(call: &Call, env: &HashMap<String, Tensor>) -> Result<Vec<Arg>> {
    let positional = call
        .args
        .iter()
        .map(|(e, col)| resolve(call, e, *col, env))
        .collect::<Result<Vec<_>>>()?;
    let call_err = |column: usize, error: CallError| Error::Call {
        line: call.line,
        column,
        error: Box::new(error),
    };
    let Some(sig) = crate::ir::lookup_symbol(&call.symbol).and_then(|s| s.signature) else {
        if let Some((_, col, _, _)) = call.keywords.first() {
            return Err(call_err(
                *col,
                CallError::NoKeywords {
                    op: call.symbol.clone(),
                },
            ));
        }
        return positional
            .into_iter()
            .zip(&call.args)
            .map(|(g, (_, col))| match g {
                Given::One(a) => Ok(a),
                Given::Tensors(_) => Err(perr(
                    call.line,
                    *col,
                    format!("`{}` takes no list of tensors", call.symbol),
                )),
            })
            .collect();
    };
    let keywords = call
        .keywords
        .iter()
        .map(|(k, _, e, col)| Ok((k.clone(), resolve(call, e, *col, env)?)))
        .collect::<Result<Vec<_>>>()?;
    sig.bind(positional, keywords).map_err(|error| {
        // Point at the argument the error is about.
        let keyword_col = |name: &str, value: bool| {
            call.keywords
                .iter()
                .find(|(k, ..)| k == name)
                .map(|(_, kc, _, vc)| if value { *vc } else { *kc })
        };
        let column = match &error {
            CallError::UnknownKeyword { keyword, .. } => keyword_col(keyword, false),
            CallError::Duplicate { param, .. } => keyword_col(param, false),
            CallError::WrongKind { param, .. } => keyword_col(param, true).or_else(|| {
                let i = sig.params.iter().position(|p| p.name == param)?;
                call.args.get(i).map(|(_, c)| *c)
            }),
            _ => None,
        };
        call_err(column.unwrap_or(call.symbol_col), error)
    })
}

/// Pre-order list of a bound symbol's subsymbols with their depth.
fn flatten<'a>(subs: &'a [BoundSymbol], depth: usize, out: &mut Vec<(usize, &'a BoundSymbol)>) {
    for s in subs {
        out.push((depth, s));
        flatten(&s.subsymbols, depth + 1, out);
    }
}

fn bind_statement(stmt: &Statement, env: &mut HashMap<String, Tensor>) -> Result<()> {
    let call = &stmt.call;
    let sym = lookup_symbol(&call.symbol).ok_or_else(|| Error::Call {
        line: call.line,
        column: call.symbol_col,
        error: Box::new(CallError::UnknownOp {
            name: call.symbol.clone(),
            suggestion: suggest(&call.symbol, symbol_ids().iter().map(String::as_str)),
        }),
    })?;
    let args = call_args(call, env)?;
    let before = trace_ctx::scope_len()?;
    let outs = bind(sym, args).map_err(|e| perr(call.line, call.symbol_col, e.to_string()))?;
    if outs.len() != call.targets.len() {
        return Err(perr(
            call.line,
            1,
            format!(
                "`{}` returns {} values but {} names are assigned",
                call.symbol,
                outs.len(),
                call.targets.len()
            ),
        ));
    }
    let recorded = trace_ctx::scope_len()? == before + 1;
    for (name, out) in call.targets.iter().zip(&outs) {
        if env.contains_key(name) {
            return Err(perr(call.line, 1, format!("`{name}` is already defined")));
        }
        if recorded && call.rename {
            trace_ctx::rename_value(out.value(), name)?;
        }
        env.insert(name.clone(), out.clone());
    }
    for (name, ty_text) in &call.annotations {
        let Some(t) = env.get(name) else { continue };
        let want = parse_type(ty_text).ok_or_else(|| {
            perr(
                call.line,
                1,
                format!("invalid type annotation \"{ty_text}\" for `{name}`"),
            )
        })?;
        if &want != t.ty() {
            return Err(perr(
                call.line,
                call.symbol_col,
                format!(
                    "annotation says `{name}` is \"{want}\" but {} computes \"{}\"",
                    call.symbol,
                    t.ty()
                ),
            ));
        }
    }
    if stmt.subs.is_empty() || !recorded {
        return Ok(());
    }
    // Align the written subsymbols with the decomposition and take their names.
    let renames = trace_ctx::with_last_bsym(|last| -> Result<Vec<(Value, String)>> {
        let mut flat = Vec::new();
        if let Some(b) = last {
            flatten(&b.subsymbols, 1, &mut flat);
        }
        if flat.len() != stmt.subs.len() {
            return Err(perr(
                call.line,
                call.symbol_col,
                format!(
                    "{} subsymbol lines are written under `{}` but its decomposition has {}",
                    stmt.subs.len(),
                    call.symbol,
                    flat.len()
                ),
            ));
        }
        let mut renames = Vec::new();
        for ((depth, sub), (want_depth, written)) in flat.iter().zip(&stmt.subs) {
            if sub.sym.id != written.symbol
                || depth != want_depth
                || sub.outputs.len() != written.targets.len()
            {
                return Err(perr(
                    written.line,
                    written.symbol_col,
                    format!(
                        "expected `{}` here (the decomposition of `{}`), found `{}`",
                        sub.sym.id, call.symbol, written.symbol
                    ),
                ));
            }
            renames.extend(
                sub.outputs
                    .iter()
                    .copied()
                    .zip(written.targets.iter().cloned()),
            );
        }
        Ok(renames)
    })??;
    for (v, name) in renames {
        trace_ctx::rename_value(v, &name)?;
    }
    Ok(())
}

/// Parses trace text into a trace; every parameter must be annotated.
pub fn parse_trace(text: &str) -> Result<Trace> {
    parse_trace_with(text, &HashMap::new())
}

/// Parses trace text, taking each parameter's type from `given` (by name) where the text does
/// not annotate it; where it does, the two must agree (shape, dtype and device).
pub fn parse_trace_with(text: &str, given: &HashMap<String, TensorType>) -> Result<Trace> {
    let parsed = parse_structure(text, given)?;
    let mut reserved: HashSet<String> = parsed.params.iter().map(|(n, _)| n.clone()).collect();
    for s in &parsed.statements {
        reserved.extend(s.call.targets.iter().cloned());
        for (_, sub) in &s.subs {
            reserved.extend(sub.targets.iter().cloned());
        }
    }
    let mut trace = trace_with(&parsed.params, reserved, &parsed.provenance, |inputs| {
        let mut env: HashMap<String, Tensor> = parsed
            .params
            .iter()
            .map(|(n, _)| n.clone())
            .zip(inputs.iter().cloned())
            .collect();
        for stmt in &parsed.statements {
            bind_statement(stmt, &mut env)?;
        }
        parsed
            .returns
            .iter()
            .map(|(name, line, col)| {
                env.get(name)
                    .cloned()
                    .ok_or_else(|| perr(*line, *col, format!("unknown name `{name}` in return")))
            })
            .collect()
    })?;
    trace.fn_name = parsed.fn_name;
    Ok(trace)
}

/// Parses one Python literal (`None`, `True`, `-inf`, `1e-05`, `'none'`, `[1, 2]`,
/// `dtypes.f32`, `devices.cpu`); `None` when `text` is not exactly one literal.
pub fn parse_literal(text: &str) -> Option<Arg> {
    let toks = lex(text, 1).ok()?;
    let mut c = Cursor {
        toks: &toks,
        pos: 0,
        line: 1,
        end_col: text.len() + 1,
        nested: Vec::new(),
    };
    match parse_literal_or_name(&mut c).ok()? {
        ArgExpr::Lit(a) if c.peek().is_none() => Some(a),
        _ => None,
    }
}
