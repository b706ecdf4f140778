//! The ltorch table's signature declarations, written like Python ones with light types
//! (`input: Tensor, dim: list[int]? = None, *, keepdim: bool = False`), parsed into core's
//! [`Signature`]. The kinds and what each accepts are described in `thunder_core::ir::signature`.

use thunder_core::error::{Error, Result};
use thunder_core::ir::signature::{Kind, Param};
use thunder_core::ir::Signature;

/// Parses a declaration; a malformed one is a bug in the op table (`Error::Bug`).
pub fn parse_signature(op: &'static str, text: &'static str) -> Result<Signature> {
    let bug = |what: String| Error::Bug(format!("signature of {op}: {what}"));
    let mut params = Vec::new();
    let mut keyword_only = false;
    for part in split_top(text) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        if part == "*" {
            keyword_only = true;
            continue;
        }
        let (decl, default) = match part.split_once('=') {
            Some((d, v)) => (d.trim(), Some(v.trim())),
            None => (part, None),
        };
        let (name, ty) = decl
            .split_once(':')
            .ok_or_else(|| bug(format!("`{part}` has no type")))?;
        let ty = ty.trim();
        let (kinds_text, optional) = match ty.strip_suffix('?') {
            Some(t) => (t, true),
            None => (ty, false),
        };
        let kinds = kinds_text
            .split('|')
            .map(|k| parse_kind(k.trim()).ok_or_else(|| bug(format!("unknown kind `{k}`"))))
            .collect::<Result<Vec<_>>>()?;
        let default = default
            .map(|d| {
                thunder_core::text::parse_literal(d)
                    .ok_or_else(|| bug(format!("bad default `{d}`")))
            })
            .transpose()?;
        params.push(Param {
            name: name.trim(),
            ty,
            kinds,
            optional,
            default,
            keyword_only,
        });
    }
    let sig = Signature { op, params };
    for p in &sig.params {
        if let Some(d) = &p.default {
            if p.coerce(d.clone()).as_ref() != Some(d) {
                return Err(bug(format!("default of `{}` is not a {}", p.name, p.ty)));
            }
        }
    }
    Ok(sig)
}

fn parse_kind(text: &str) -> Option<Kind> {
    Some(match text {
        "Tensor" => Kind::Tensor,
        "int" => Kind::Int,
        "float" => Kind::Float,
        "number" => Kind::Number,
        "bool" => Kind::Bool,
        "str" => Kind::Str,
        "dtype" => Kind::DType,
        "device" => Kind::Device,
        "list[int]" => Kind::Ints,
        "list[Tensor]" => Kind::Tensors,
        _ => return None,
    })
}
/// Splits a declaration at commas outside brackets.
fn split_top(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use thunder_core::ir::{Arg, CallError, Given};

    fn sig() -> Signature {
        parse_signature(
            "ltorch.var",
            "input: Tensor, dim: list[int]? = None, *, correction: number = 1, keepdim: bool = False",
        )
        .expect("declaration parses")
    }

    #[test]
    fn binds_keywords_defaults_and_coerces() {
        let s = sig();
        let args = s
            .bind(
                vec![Given::One(Arg::Value(thunder_core::ir::Value(0)))],
                vec![
                    ("keepdim".into(), Given::One(Arg::Bool(true))),
                    ("dim".into(), Given::One(Arg::Int(1))),
                ],
            )
            .expect("binds");
        assert_eq!(
            args,
            vec![
                Arg::Value(thunder_core::ir::Value(0)),
                Arg::Ints(vec![1]),
                Arg::Int(1),
                Arg::Bool(true)
            ]
        );
        assert_eq!(
            s.to_string(),
            "input: Tensor, dim: list[int]? = None, *, correction: number = 1, keepdim: bool = False"
        );
    }

    #[test]
    fn errors_name_the_parameter_and_suggest() {
        let s = sig();
        let t = || Given::One(Arg::Value(thunder_core::ir::Value(0)));
        match s.bind(
            vec![t()],
            vec![("keepdims".into(), Given::One(Arg::Bool(true)))],
        ) {
            Err(CallError::UnknownKeyword { suggestion, .. }) => {
                assert_eq!(suggestion.as_deref(), Some("keepdim"))
            }
            other => panic!("expected UnknownKeyword, got {other:?}"),
        }
        match s.bind(vec![t(), Given::One(Arg::Str("x".into()))], vec![]) {
            Err(e @ CallError::WrongKind { .. }) => {
                assert!(
                    e.to_string()
                        .contains("argument `dim` must be a list of ints"),
                    "{e}"
                )
            }
            other => panic!("expected WrongKind, got {other:?}"),
        }
        match s.bind(vec![t(), t(), t()], vec![]) {
            Err(e @ CallError::TooManyPositional { .. }) => assert!(
                e.to_string()
                    .contains("var(input: Tensor, dim: list[int]? = None, *,"),
                "{e}"
            ),
            other => panic!("expected TooManyPositional, got {other:?}"),
        }
    }
}
