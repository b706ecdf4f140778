//! Op signatures: each ltorch op declares its parameters once, as torch names them (names,
//! kinds, torch's defaults, which are keyword-only). The trace parser binds keyword and
//! positional arguments with them, the printer prints calls with them, `thunder ops` lists them
//! and argument errors quote them.
//!
//! A signature is written like a Python one with light types, for example
//! `input: Tensor, dim: list[int]? = None, *, correction: number = 1, keepdim: bool = False`.
//! Kinds: `Tensor`, `int`, `float`, `number` (int, float or bool), `bool`, `str`, `dtype`,
//! `device`, `list[int]`, `list[Tensor]`, unions with `|`, and a trailing `?` for "or None".
//! A bare int given for a `list[int]` parameter becomes a one-element list (as torch's `dim`);
//! an int given for a `float` parameter becomes a float.
//!
//! Parameters are declared in the order the op's decomposition reads its arguments (the
//! canonical, positional form of the call); that is torch's order except where torch has a
//! parameter we do not (SDPA's `dropout_p`): such parameters after it are keyword-only. A
//! `list[Tensor]` parameter (`cat`, `stack`) is passed last, flattened.

use crate::error::Result;
use crate::ir::Arg;
use crate::text::print::format_float;
use std::fmt;

/// One kind a parameter accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tensor,
    Int,
    Float,
    Number,
    Bool,
    Str,
    DType,
    Device,
    Ints,
    Tensors,
}

impl Kind {
    fn accepts(self, arg: &Arg) -> bool {
        matches!(
            (self, arg),
            (Kind::Tensor, Arg::Value(_))
                | (Kind::Int, Arg::Int(_))
                | (Kind::Float, Arg::Float(_))
                | (Kind::Number, Arg::Int(_) | Arg::Float(_) | Arg::Bool(_))
                | (Kind::Bool, Arg::Bool(_))
                | (Kind::Str, Arg::Str(_))
                | (Kind::DType, Arg::DType(_))
                | (Kind::Device, Arg::Device(_))
                | (Kind::Ints, Arg::Ints(_))
        )
    }
}

/// A default value, written as Python (`None`, `1e-05`, `"none"`, `dtypes.f32`).
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: &'static str,
    /// As declared (`int|list[int]`), for messages and listings.
    pub ty: &'static str,
    pub kinds: Vec<Kind>,
    pub optional: bool,
    pub default: Option<Arg>,
    pub keyword_only: bool,
}

impl Param {
    /// `arg` converted to what this parameter takes, or `None` when it takes no such thing.
    pub fn coerce(&self, arg: Arg) -> Option<Arg> {
        if matches!(arg, Arg::None) {
            return self.optional.then_some(Arg::None);
        }
        if self.kinds.iter().any(|k| k.accepts(&arg)) {
            return Some(arg);
        }
        match arg {
            Arg::Int(i) if self.kinds.contains(&Kind::Ints) => Some(Arg::Ints(vec![i])),
            Arg::Int(i) if self.kinds.contains(&Kind::Float) => Some(Arg::Float(i as f64)),
            _ => None,
        }
    }

    fn is_tensor_list(&self) -> bool {
        self.kinds == [Kind::Tensors]
    }
}

/// An argument as written in a call: one value, or a list of tensors (`[a, b]`).
#[derive(Debug, Clone, PartialEq)]
pub enum Given {
    One(Arg),
    Tensors(Vec<Arg>),
}

/// What is wrong with a call, with the words a user needs to fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error(
        "unknown op `{name}`{}{}",
        did_you_mean(suggestion),
        unregistered_library(name)
    )]
    UnknownOp {
        name: String,
        suggestion: Option<String>,
    },
    #[error("{op}() got an unexpected keyword argument `{keyword}`{}; its signature is {op}({signature})", did_you_mean(suggestion))]
    UnknownKeyword {
        op: String,
        keyword: String,
        suggestion: Option<String>,
        signature: String,
    },
    #[error("{op}() takes {max} positional arguments but {got} were given; its signature is {op}({signature})")]
    TooManyPositional {
        op: String,
        max: usize,
        got: usize,
        signature: String,
    },
    #[error("{op}() missing required argument `{param}`; its signature is {op}({signature})")]
    Missing {
        op: String,
        param: String,
        signature: String,
    },
    #[error("{op}() got multiple values for argument `{param}`")]
    Duplicate { op: String, param: String },
    #[error("{op}(): argument `{param}` must be {expected}, got {got}")]
    WrongKind {
        op: String,
        param: String,
        expected: String,
        got: String,
    },
    #[error("{op}() takes no keyword arguments (prims are called positionally)")]
    NoKeywords { op: String },
}

/// An ltorch op is unknown when the library was never registered (a program that parses trace
/// text or loads plugins before calling any thunder_torch function): say how to fix that.
fn unregistered_library(name: &str) -> &'static str {
    let registered = crate::ir::symbol_ids()
        .iter()
        .any(|id| id.starts_with("ltorch."));
    if name.starts_with("ltorch.") && !registered {
        "; the ltorch op library is not registered: call `thunder_torch::register()` first"
    } else {
        ""
    }
}

fn did_you_mean(s: &Option<String>) -> String {
    s.as_ref()
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default()
}

/// The closest of `candidates` to `word`, if it is close enough to be a likely typo. Dotted
/// names (`ltorch.softmx`) are compared by their last part, among those with the same prefix.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let split = |s: &'a str| s.rsplit_once('.').unwrap_or(("", s));
    let (prefix, short) = word.rsplit_once('.').unwrap_or(("", word));
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        let (c_prefix, c_short) = split(c);
        if c_prefix != prefix {
            continue;
        }
        let score = strsim::jaro_winkler(short, c_short);
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, c));
        }
    }
    best.filter(|(s, _)| *s >= 0.85).map(|(_, c)| c.to_string())
}

/// How an argument of the wrong kind is described in an error.
fn describe(arg: &Given) -> String {
    match arg {
        Given::Tensors(_) => "a list of tensors".into(),
        Given::One(a) => match a {
            Arg::Value(_) => "a tensor".into(),
            Arg::Int(i) => format!("the int {i}"),
            Arg::Float(x) => format!("the float {}", format_float(*x)),
            Arg::Bool(b) => format!("the bool {}", if *b { "True" } else { "False" }),
            Arg::Ints(v) => format!("the list {v:?}"),
            Arg::DType(d) => format!("the dtype dtypes.{}", d.short_name()),
            Arg::Device(d) => format!("the device {}", crate::text::device_literal(*d)),
            Arg::Str(s) => format!("the string \"{s}\""),
            Arg::None => "None".into(),
        },
    }
}

fn expected_words(p: &Param) -> String {
    let mut words: Vec<&str> = p
        .kinds
        .iter()
        .map(|k| match k {
            Kind::Tensor => "a tensor",
            Kind::Int => "an int",
            Kind::Float => "a float",
            Kind::Number => "a number",
            Kind::Bool => "True or False",
            Kind::Str => "a string",
            Kind::DType => "a dtype (dtypes.f32, ...)",
            Kind::Device => "a device (devices.cpu, ...)",
            Kind::Ints => "a list of ints",
            Kind::Tensors => "a list of tensors",
        })
        .collect();
    if p.optional {
        words.push("None");
    }
    format!("{} ({})", words.join(" or "), p.ty)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    pub op: &'static str,
    pub params: Vec<Param>,
}

impl Signature {
    /// The op's short name (`softmax` for `ltorch.softmax`).
    pub fn short_name(&self) -> &'static str {
        self.op.rsplit('.').next().unwrap_or(self.op)
    }

    /// Binds `positional` and `keywords` to the parameters, fills torch's defaults, and returns
    /// the arguments in the canonical order the decomposition reads.
    ///
    /// For traces written before keyword arguments existed, a call that spells every
    /// parameter positionally (keyword-only ones included, in declaration order) is accepted.
    pub fn bind(
        &self,
        positional: Vec<Given>,
        keywords: Vec<(String, Given)>,
    ) -> Result<Vec<Arg>, CallError> {
        let n = self.params.len();
        let list_at = self.params.iter().position(Param::is_tensor_list);
        // The old canonical form of `cat`/`stack`: `cat(dim, t0, t1, ...)`.
        if let (Some(_), true) = (list_at, keywords.is_empty()) {
            if matches!(positional.first(), Some(Given::One(Arg::Int(_)))) && positional.len() > 1 {
                return positional
                    .into_iter()
                    .map(|g| match g {
                        Given::One(a) => Ok(a),
                        other => Err(self.wrong(list_at.unwrap_or(0), &other)),
                    })
                    .collect();
            }
        }
        let legacy = keywords.is_empty() && positional.len() == n && list_at.is_none();
        let max_positional = if legacy {
            n
        } else {
            self.params.iter().filter(|p| !p.keyword_only).count()
        };
        if positional.len() > max_positional {
            return Err(CallError::TooManyPositional {
                op: self.short_name().into(),
                max: max_positional,
                got: positional.len(),
                signature: self.to_string(),
            });
        }
        let mut slots: Vec<Option<Given>> = vec![None; n];
        for (i, g) in positional.into_iter().enumerate() {
            slots[i] = Some(g);
        }
        for (key, g) in keywords {
            let Some(i) = self.params.iter().position(|p| p.name == key) else {
                return Err(CallError::UnknownKeyword {
                    op: self.short_name().into(),
                    suggestion: suggest(&key, self.params.iter().map(|p| p.name)),
                    keyword: key,
                    signature: self.to_string(),
                });
            };
            if slots[i].is_some() {
                return Err(CallError::Duplicate {
                    op: self.short_name().into(),
                    param: key,
                });
            }
            slots[i] = Some(g);
        }
        let mut out = Vec::with_capacity(n);
        let mut list = Vec::new();
        for (i, (p, slot)) in self.params.iter().zip(slots).enumerate() {
            let given = match slot {
                Some(g) => g,
                None => match &p.default {
                    Some(d) => Given::One(d.clone()),
                    None => {
                        return Err(CallError::Missing {
                            op: self.short_name().into(),
                            param: p.name.into(),
                            signature: self.to_string(),
                        })
                    }
                },
            };
            match given {
                Given::Tensors(ts) if p.is_tensor_list() => list = ts,
                Given::One(a) if !p.is_tensor_list() => {
                    let shown = Given::One(a.clone());
                    out.push(p.coerce(a).ok_or_else(|| self.wrong(i, &shown))?);
                }
                other => return Err(self.wrong(i, &other)),
            }
        }
        out.extend(list);
        Ok(out)
    }

    fn wrong(&self, i: usize, got: &Given) -> CallError {
        let p = &self.params[i];
        CallError::WrongKind {
            op: self.short_name().into(),
            param: p.name.into(),
            expected: expected_words(p),
            got: describe(got),
        }
    }

    /// Formats canonical `args` as a call's argument list: positional parameters by position,
    /// keyword-only ones as `name=value`. `None` when `args` do not fit the signature (then
    /// the caller prints them positionally).
    pub fn format_args(&self, args: &[Arg], fmt: &dyn Fn(&Arg) -> String) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(at) = self.params.iter().position(Param::is_tensor_list) {
            let fixed = self.params.len() - 1;
            if args.len() < fixed {
                return None;
            }
            let (head, tensors) = args.split_at(fixed);
            let items: Vec<String> = tensors.iter().map(fmt).collect();
            let mut rest = head.iter();
            for (i, p) in self.params.iter().enumerate() {
                if i == at {
                    parts.push(format!("[{}]", items.join(", ")));
                } else {
                    let a = rest.next()?;
                    parts.push(self.piece(p, a, fmt));
                }
            }
            return Some(parts.join(", "));
        }
        if args.len() != self.params.len() {
            return None;
        }
        for (p, a) in self.params.iter().zip(args) {
            parts.push(self.piece(p, a, fmt));
        }
        Some(parts.join(", "))
    }

    fn piece(&self, p: &Param, a: &Arg, fmt: &dyn Fn(&Arg) -> String) -> String {
        if p.keyword_only {
            format!("{}={}", p.name, fmt(a))
        } else {
            fmt(a)
        }
    }
}

impl fmt::Display for Signature {
    /// `input: Tensor, dim: int, *, dtype: dtype? = None`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut star = false;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if p.keyword_only && !star {
                f.write_str("*, ")?;
                star = true;
            }
            write!(f, "{}: {}", p.name, p.ty)?;
            if let Some(d) = &p.default {
                write!(f, " = {}", crate::text::format_literal(d))?;
            }
        }
        Ok(())
    }
}
