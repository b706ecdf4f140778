//! The line syntax of trace text: calls with positional and keyword arguments, literals,
//! calls nested in arguments and in `return`, and the type annotations in comments.

use super::lexer::{Tok, Token};
use super::parse_device_literal;
use crate::error::{Error, Result};
use crate::ir::Arg;

#[derive(Debug)]
pub(super) enum ArgExpr {
    Name(String),
    Lit(Arg),
    /// `[a, b]`: a list of tensors (`cat`, `stack`).
    Names(Vec<(String, usize)>),
}

#[derive(Debug)]
pub(super) struct Call {
    pub(super) line: usize,
    pub(super) targets: Vec<String>,
    pub(super) symbol: String,
    pub(super) symbol_col: usize,
    pub(super) args: Vec<(ArgExpr, usize)>,
    /// `name=value` arguments: name, its column, the value and its column.
    pub(super) keywords: Vec<(String, usize, ArgExpr, usize)>,
    pub(super) annotations: Vec<(String, String)>,
    /// False for a call written inside another call's arguments (`f(g(x))`): its result keeps
    /// the trace's own name instead of the temporary the parser gave it.
    pub(super) rename: bool,
}

pub(super) fn perr(line: usize, column: usize, message: impl Into<String>) -> Error {
    Error::Parse {
        line,
        column,
        message: message.into(),
    }
}

pub(super) struct Cursor<'a> {
    pub(super) toks: &'a [Token],
    pub(super) pos: usize,
    pub(super) line: usize,
    pub(super) end_col: usize,
    /// Calls written as arguments (`f(g(x))`), in the order they must run, each assigned to a
    /// temporary that the enclosing call reads.
    pub(super) nested: Vec<Call>,
}

impl Cursor<'_> {
    pub(super) fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }
    pub(super) fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end_col, |t| t.column)
    }
    pub(super) fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.tok.clone());
        self.pos += 1;
        t
    }
    pub(super) fn unexpected(&self, col: usize, what: &str, found: Option<Tok>) -> Error {
        let found = found.map_or("the end of the line".to_string(), |t| format!("{t:?}"));
        perr(self.line, col, format!("expected {what}, found {found}"))
    }
    pub(super) fn expect(&mut self, want: &Tok, what: &str) -> Result<()> {
        let col = self.col();
        match self.next() {
            Some(t) if &t == want => Ok(()),
            other => Err(self.unexpected(col, what, other)),
        }
    }
    pub(super) fn ident(&mut self, what: &str) -> Result<(String, usize)> {
        let col = self.col();
        match self.next() {
            Some(Tok::Ident(s)) => Ok((s, col)),
            other => Err(self.unexpected(col, what, other)),
        }
    }
}

pub(super) fn parse_literal_or_name(c: &mut Cursor) -> Result<ArgExpr> {
    let col = c.col();
    let line = c.line;
    let tok = c.next();
    Ok(match tok {
        Some(Tok::Int(i)) => ArgExpr::Lit(Arg::Int(i)),
        Some(Tok::Float(x)) => ArgExpr::Lit(Arg::Float(x)),
        Some(Tok::Str(s)) => ArgExpr::Lit(Arg::Str(s)),
        Some(open @ (Tok::LBracket | Tok::LParen)) => {
            // `[1, 2]`, `(2, 2)` (ints) or `[a, b]` (tensor names).
            let close = if open == Tok::LBracket {
                Tok::RBracket
            } else {
                Tok::RParen
            };
            let closing = if open == Tok::LBracket { "`]`" } else { "`)`" };
            let mut ints = Vec::new();
            let mut names = Vec::new();
            if c.peek() == Some(&close) {
                c.next();
            } else {
                loop {
                    let col = c.col();
                    match c.next() {
                        Some(Tok::Int(i)) if names.is_empty() => ints.push(i),
                        Some(Tok::Ident(n)) if ints.is_empty() && !n.contains('.') => {
                            names.push((n, col))
                        }
                        _ => {
                            return Err(perr(
                                line,
                                col,
                                "expected an integer or a tensor name in the list (lists hold \
                                 all ints or all names)",
                            ))
                        }
                    }
                    let col = c.col();
                    match c.next() {
                        Some(Tok::Comma) if c.peek() == Some(&close) => {
                            c.next();
                            break;
                        }
                        Some(Tok::Comma) => {}
                        Some(t) if t == close => break,
                        _ => return Err(perr(line, col, format!("expected `,` or {closing}"))),
                    }
                }
            }
            if names.is_empty() {
                ArgExpr::Lit(Arg::Ints(ints))
            } else {
                ArgExpr::Names(names)
            }
        }
        Some(Tok::Ident(name)) => match name.as_str() {
            "True" => ArgExpr::Lit(Arg::Bool(true)),
            "False" => ArgExpr::Lit(Arg::Bool(false)),
            "None" => ArgExpr::Lit(Arg::None),
            _ if name.starts_with("dtypes.") => {
                let d = crate::dtype::DType::from_short_name(&name["dtypes.".len()..])
                    .ok_or_else(|| perr(line, col, format!("unknown dtype `{name}`")))?;
                ArgExpr::Lit(Arg::DType(d))
            }
            _ if name.starts_with("devices.") => {
                let d = parse_device_literal(&name)
                    .ok_or_else(|| perr(line, col, format!("unknown device `{name}`")))?;
                ArgExpr::Lit(Arg::Device(d))
            }
            _ if name.contains('.') && c.peek() == Some(&Tok::LParen) => {
                c.next();
                let (args, keywords) = parse_arguments(c)?;
                // Not a name a program can spell: temporaries never collide with the user's.
                let temp = format!("{name}@{line}:{col}");
                c.nested.push(Call {
                    line,
                    targets: vec![temp.clone()],
                    symbol: name,
                    symbol_col: col,
                    args,
                    keywords,
                    annotations: Vec::new(),
                    rename: false,
                });
                ArgExpr::Name(temp)
            }
            _ if name.contains('.') => {
                return Err(perr(line, col, format!("unexpected dotted name `{name}`")))
            }
            _ => ArgExpr::Name(name),
        },
        Some(t) => {
            return Err(perr(
                line,
                col,
                format!("expected an argument, found {t:?}"),
            ))
        }
        None => {
            return Err(perr(
                line,
                col,
                "expected an argument, found the end of the line",
            ))
        }
    })
}

/// The arguments of a call after its `(`, through the closing `)`.
#[allow(clippy::type_complexity)]
pub(super) fn parse_arguments(
    c: &mut Cursor,
) -> Result<(Vec<(ArgExpr, usize)>, Vec<(String, usize, ArgExpr, usize)>)> {
    let line = c.line;
    let mut args = Vec::new();
    let mut keywords: Vec<(String, usize, ArgExpr, usize)> = Vec::new();
    if c.peek() == Some(&Tok::RParen) {
        c.next();
    } else {
        loop {
            let col = c.col();
            let is_keyword = matches!(c.peek(), Some(Tok::Ident(_)))
                && matches!(c.toks.get(c.pos + 1).map(|t| &t.tok), Some(Tok::Equals));
            if is_keyword {
                let (name, name_col) = c.ident("a keyword")?;
                if name.contains('.') {
                    return Err(perr(
                        line,
                        name_col,
                        format!("`{name}` is not a keyword name"),
                    ));
                }
                c.next();
                let value_col = c.col();
                let value = parse_literal_or_name(c)?;
                keywords.push((name, name_col, value, value_col));
            } else if !keywords.is_empty() {
                return Err(perr(
                    line,
                    col,
                    "positional argument follows keyword argument",
                ));
            } else {
                args.push((parse_literal_or_name(c)?, col));
            }
            let col = c.col();
            match c.next() {
                Some(Tok::Comma) => {}
                Some(Tok::RParen) => break,
                _ => return Err(perr(line, col, "expected `,` or `)` after an argument")),
            }
        }
    }
    Ok((args, keywords))
}

/// `a, b = sym.id(args)  # a: "type", b: "type"`, after the calls nested in its arguments.
pub(super) fn parse_call(toks: &[Token], line: usize, end_col: usize) -> Result<Vec<Call>> {
    let mut c = Cursor {
        toks,
        pos: 0,
        line,
        end_col,
        nested: Vec::new(),
    };
    let mut targets = Vec::new();
    let parens = c.peek() == Some(&Tok::LParen);
    if parens {
        c.next();
    }
    loop {
        targets.push(c.ident("a name to assign")?.0);
        if c.peek() == Some(&Tok::Comma) {
            c.next();
            if parens && c.peek() == Some(&Tok::RParen) {
                break;
            }
            continue;
        }
        break;
    }
    if parens {
        c.expect(&Tok::RParen, "`)`")?;
    }
    c.expect(&Tok::Equals, "`=`")?;
    let (symbol, symbol_col) = c.ident("a symbol such as `ltorch.add`")?;
    c.expect(&Tok::LParen, "`(`")?;
    let (args, keywords) = parse_arguments(&mut c)?;
    let mut annotations = Vec::new();
    match c.next() {
        None => {}
        Some(Tok::Comment(text)) => annotations = parse_annotations(&text),
        Some(t) => {
            return Err(perr(
                line,
                c.toks[c.pos - 1].column,
                format!("unexpected {t:?} after the call"),
            ))
        }
    }
    let mut calls = std::mem::take(&mut c.nested);
    calls.push(Call {
        line,
        targets,
        symbol,
        symbol_col,
        args,
        keywords,
        annotations,
        rename: true,
    });
    Ok(calls)
}

/// `return a`, `return a, b`, `return (a, b)`, where each may be a call (`return ltorch.f(x)`):
/// the returned names, and the calls to run first.
#[allow(clippy::type_complexity)]
pub(super) fn parse_return(
    toks: &[Token],
    line: usize,
    end_col: usize,
) -> Result<(Vec<(String, usize, usize)>, Vec<Call>)> {
    let mut c = Cursor {
        toks,
        pos: 1,
        line,
        end_col,
        nested: Vec::new(),
    };
    let parens = c.peek() == Some(&Tok::LParen);
    if parens {
        c.next();
    }
    let mut names = Vec::new();
    loop {
        match c.peek() {
            None | Some(Tok::Comment(_)) => break,
            Some(Tok::RParen) if parens => {
                c.next();
                break;
            }
            _ => {}
        }
        let col = c.col();
        match parse_literal_or_name(&mut c)? {
            ArgExpr::Name(name) => names.push((name, line, col)),
            other => {
                return Err(perr(
                    line,
                    col,
                    format!("`return` takes names or calls, found {other:?}"),
                ))
            }
        }
        match c.peek() {
            Some(Tok::Comma) => {
                c.next();
            }
            Some(Tok::RParen) if parens => {}
            None | Some(Tok::Comment(_)) => break,
            Some(t) => {
                let t = t.clone();
                return Err(perr(
                    line,
                    c.col(),
                    format!("expected `,` after a returned value, found {t:?}"),
                ));
            }
        }
    }
    Ok((names, c.nested))
}

/// `t0: "cpu f32[2]", t1: "cpu b8[2]"` (anything else in the comment is ignored).
pub(super) fn parse_annotations(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(colon) = rest.find(": \"") {
        let name = rest[..colon]
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_string();
        let after = &rest[colon + 3..];
        let Some(close) = after.find('"') else { break };
        out.push((name, after[..close].to_string()));
        rest = &after[close + 1..];
    }
    out
}
