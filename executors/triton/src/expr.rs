//! The small expression language of kernel manifests (`params`, `constraints`, `grid`).
//!
//! Manifests are user input, so parsing and evaluation return errors and never panic:
//!
//! ```text
//! expr    := compare
//! compare := sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)?
//! sum     := product (("+" | "-") product)*
//! product := unary (("*" | "/" | "%") unary)*
//! unary   := "-" unary | atom
//! atom    := INT | FLOAT | 'STRING' | "none" | "true" | "false" | "(" expr ")"
//!          | NAME "(" expr ("," expr)* ")"                     -- cdiv, sqrt, len, min, max, default
//!          | NAME ("." ("shape" | "stride") "[" INT "]" | ".rank" | ".numel" | "[" INT "]")?
//! ```
//!
//! `NAME` is one of the symbol's arguments or outputs as the manifest names them. `/` on two
//! integers divides exactly when it can and floors otherwise (as Python's `//` on non-negative
//! sizes); `default(a, e)` is `a` unless the argument is `None`.

use std::collections::HashMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    None,
    Name(String),
    /// `name.shape[i]`, `name.stride[i]`, `name[i]` (an int list argument).
    Index(String, Field, i64),
    /// `name.rank`, `name.numel`.
    Prop(String, Field),
    Call(String, Vec<Expr>),
    Neg(Box<Expr>),
    Bin(Op, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Shape,
    Stride,
    Item,
    Rank,
    Numel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A value an expression can take, and what names are bound to.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A string argument (`approximate = 'tanh'`); compared with `==` only.
    Str(String),
    None,
    Ints(Vec<i64>),
    /// A tensor, by its shape (row-major strides are implied: the host passes contiguous
    /// tensors and the plugin refuses others).
    Tensor(Vec<i64>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => write!(f, "'{s}'"),
            Value::None => write!(f, "none"),
            Value::Ints(v) => write!(f, "{v:?}"),
            Value::Tensor(s) => write!(f, "tensor{s:?}"),
        }
    }
}

pub const FUNCTIONS: [&str; 6] = ["cdiv", "sqrt", "len", "min", "max", "default"];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    Float(f64),
    Ident(String),
    Str(String),
    Sym(&'static str),
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
                i += 1;
            }
            let mut float = false;
            if i < b.len() && b[i] == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                float = true;
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                float = true;
                i += 1;
                if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
                    i += 1;
                }
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let text = s[start..i].replace('_', "");
            out.push(if float {
                Tok::Float(text.parse().map_err(|_| format!("bad number `{text}`"))?)
            } else {
                Tok::Int(
                    text.parse()
                        .map_err(|_| format!("integer `{text}` out of range"))?,
                )
            });
        } else if c == '\'' || c == '"' {
            // Single quotes read best inside TOML's double-quoted strings.
            let end = s[i + 1..]
                .find(c)
                .ok_or_else(|| format!("unterminated string starting at column {}", i + 1))?;
            out.push(Tok::Str(s[i + 1..i + 1 + end].to_string()));
            i += end + 2;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else {
            let two = s.get(i..i + 2).unwrap_or("");
            let sym = match two {
                "==" => Some("=="),
                "!=" => Some("!="),
                "<=" => Some("<="),
                ">=" => Some(">="),
                _ => None,
            };
            if let Some(sym) = sym {
                out.push(Tok::Sym(sym));
                i += 2;
                continue;
            }
            let sym = match c {
                '+' => "+",
                '-' => "-",
                '*' => "*",
                '/' => "/",
                '%' => "%",
                '<' => "<",
                '>' => ">",
                '(' => "(",
                ')' => ")",
                '[' => "[",
                ']' => "]",
                ',' => ",",
                '.' => ".",
                other => return Err(format!("unexpected character `{other}`")),
            };
            out.push(Tok::Sym(sym));
            i += 1;
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn eat(&mut self, sym: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Sym(s)) if *s == sym) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, sym: &str) -> Result<(), String> {
        if self.eat(sym) {
            Ok(())
        } else {
            Err(format!("expected `{sym}`, found {}", self.describe()))
        }
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "the end".into(),
            Some(Tok::Int(i)) => format!("`{i}`"),
            Some(Tok::Float(x)) => format!("`{x}`"),
            Some(Tok::Ident(s)) => format!("`{s}`"),
            Some(Tok::Str(s)) => format!("'{s}'"),
            Some(Tok::Sym(s)) => format!("`{s}`"),
        }
    }

    fn compare(&mut self) -> Result<Expr, String> {
        let lhs = self.sum()?;
        let op = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .into_iter()
        .find(|(s, _)| self.eat(s));
        match op {
            Some((_, op)) => Ok(Expr::Bin(op, Box::new(lhs), Box::new(self.sum()?))),
            None => Ok(lhs),
        }
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut e = self.product()?;
        loop {
            let op = if self.eat("+") {
                Op::Add
            } else if self.eat("-") {
                Op::Sub
            } else {
                return Ok(e);
            };
            e = Expr::Bin(op, Box::new(e), Box::new(self.product()?));
        }
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        loop {
            let op = if self.eat("*") {
                Op::Mul
            } else if self.eat("/") {
                Op::Div
            } else if self.eat("%") {
                Op::Rem
            } else {
                return Ok(e);
            };
            e = Expr::Bin(op, Box::new(e), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn int_index(&mut self) -> Result<i64, String> {
        self.expect("[")?;
        let neg = self.eat("-");
        let i = match self.peek() {
            Some(Tok::Int(i)) => *i,
            _ => {
                return Err(format!(
                    "expected an integer index, found {}",
                    self.describe()
                ))
            }
        };
        self.pos += 1;
        self.expect("]")?;
        Ok(if neg { -i } else { i })
    }

    fn atom(&mut self) -> Result<Expr, String> {
        let tok = self.peek().cloned();
        match tok {
            Some(Tok::Int(i)) => {
                self.pos += 1;
                Ok(Expr::Int(i))
            }
            Some(Tok::Float(x)) => {
                self.pos += 1;
                Ok(Expr::Float(x))
            }
            Some(Tok::Str(x)) => {
                self.pos += 1;
                Ok(Expr::Str(x))
            }
            Some(Tok::Sym("(")) => {
                self.pos += 1;
                let e = self.compare()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                match name.as_str() {
                    "none" => return Ok(Expr::None),
                    "true" => return Ok(Expr::Bool(true)),
                    "false" => return Ok(Expr::Bool(false)),
                    _ => {}
                }
                if self.eat("(") {
                    if !FUNCTIONS.contains(&name.as_str()) {
                        return Err(format!(
                            "unknown function `{name}` (known: {})",
                            FUNCTIONS.join(", ")
                        ));
                    }
                    let mut args = vec![self.compare()?];
                    while self.eat(",") {
                        args.push(self.compare()?);
                    }
                    self.expect(")")?;
                    let want = match name.as_str() {
                        "sqrt" | "len" => 1,
                        _ => 2,
                    };
                    if args.len() != want {
                        return Err(format!(
                            "`{name}` takes {want} argument(s), got {}",
                            args.len()
                        ));
                    }
                    if name == "default" && !matches!(args[0], Expr::Name(_)) {
                        return Err("`default`'s first argument must be an argument name".into());
                    }
                    return Ok(Expr::Call(name, args));
                }
                if self.eat(".") {
                    let field = match self.peek() {
                        Some(Tok::Ident(f)) => f.clone(),
                        _ => return Err(format!("expected a field after `{name}.`")),
                    };
                    self.pos += 1;
                    return match field.as_str() {
                        "shape" => Ok(Expr::Index(name, Field::Shape, self.int_index()?)),
                        "stride" => Ok(Expr::Index(name, Field::Stride, self.int_index()?)),
                        "rank" => Ok(Expr::Prop(name, Field::Rank)),
                        "numel" => Ok(Expr::Prop(name, Field::Numel)),
                        other => Err(format!(
                            "unknown field `{name}.{other}` (known: shape[i], stride[i], rank, numel)"
                        )),
                    };
                }
                if matches!(self.peek(), Some(Tok::Sym("["))) {
                    return Ok(Expr::Index(name, Field::Item, self.int_index()?));
                }
                Ok(Expr::Name(name))
            }
            _ => Err(format!("expected a value, found {}", self.describe())),
        }
    }
}

pub fn parse(s: &str) -> Result<Expr, String> {
    let mut p = Parser {
        toks: tokenize(s)?,
        pos: 0,
    };
    let e = p.compare()?;
    if p.pos != p.toks.len() {
        return Err(format!("unexpected {} after the expression", p.describe()));
    }
    Ok(e)
}

impl Expr {
    /// Every argument name the expression refers to.
    pub fn names(&self, out: &mut Vec<String>) {
        match self {
            Expr::Name(n) | Expr::Index(n, _, _) | Expr::Prop(n, _) => out.push(n.clone()),
            Expr::Call(_, args) => args.iter().for_each(|a| a.names(out)),
            Expr::Neg(e) => e.names(out),
            Expr::Bin(_, a, b) => {
                a.names(out);
                b.names(out);
            }
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Str(_) | Expr::None => {}
        }
    }
}

fn lookup<'a>(env: &'a HashMap<String, Value>, name: &str) -> Result<&'a Value, String> {
    env.get(name)
        .ok_or_else(|| format!("unknown name `{name}`"))
}

fn dim(len: usize, i: i64, what: &str) -> Result<usize, String> {
    let j = if i < 0 { i + len as i64 } else { i };
    if j < 0 || j >= len as i64 {
        return Err(format!("{what}[{i}] is out of range for {len} dims"));
    }
    Ok(j as usize)
}

fn as_f64(v: &Value) -> Result<f64, String> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Float(x) => Ok(*x),
        other => Err(format!("expected a number, got {other}")),
    }
}

fn checked(r: Option<i64>, what: &str) -> Result<Value, String> {
    r.map(Value::Int)
        .ok_or_else(|| format!("integer overflow or division by zero in {what}"))
}

pub fn eval(e: &Expr, env: &HashMap<String, Value>) -> Result<Value, String> {
    Ok(match e {
        Expr::Int(i) => Value::Int(*i),
        Expr::Float(x) => Value::Float(*x),
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Str(x) => Value::Str(x.clone()),
        Expr::None => Value::None,
        Expr::Name(n) => lookup(env, n)?.clone(),
        Expr::Index(n, field, i) => match (field, lookup(env, n)?) {
            (Field::Shape, Value::Tensor(shape)) => {
                Value::Int(shape[dim(shape.len(), *i, &format!("{n}.shape"))?])
            }
            (Field::Stride, Value::Tensor(shape)) => {
                let d = dim(shape.len(), *i, &format!("{n}.stride"))?;
                Value::Int(shape[d + 1..].iter().product())
            }
            (Field::Item, Value::Ints(v)) => Value::Int(v[dim(v.len(), *i, n)?]),
            (_, other) => return Err(format!("`{n}` is {other}, which cannot be indexed so")),
        },
        Expr::Prop(n, field) => match (field, lookup(env, n)?) {
            (Field::Rank, Value::Tensor(shape)) => Value::Int(shape.len() as i64),
            (Field::Numel, Value::Tensor(shape)) => Value::Int(shape.iter().product()),
            (_, other) => return Err(format!("`{n}` is {other}, not a tensor")),
        },
        Expr::Neg(a) => match eval(a, env)? {
            Value::Int(i) => checked(i.checked_neg(), "negation")?,
            Value::Float(x) => Value::Float(-x),
            other => return Err(format!("cannot negate {other}")),
        },
        Expr::Call(f, args) => call(f, args, env)?,
        Expr::Bin(op, a, b) => binary(*op, eval(a, env)?, eval(b, env)?)?,
    })
}

fn call(f: &str, args: &[Expr], env: &HashMap<String, Value>) -> Result<Value, String> {
    if f == "default" {
        // Checked at parse time: the first argument is a name.
        let v = eval(&args[0], env)?;
        return if v == Value::None {
            eval(&args[1], env)
        } else {
            Ok(v)
        };
    }
    let vals = args
        .iter()
        .map(|a| eval(a, env))
        .collect::<Result<Vec<_>, _>>()?;
    match (f, vals.as_slice()) {
        ("cdiv", [Value::Int(a), Value::Int(b)]) => {
            if *b <= 0 {
                return Err(format!("cdiv({a}, {b}): divisor must be positive"));
            }
            checked(a.checked_add(b - 1).map(|s| s.div_euclid(*b)), "cdiv")
        }
        ("sqrt", [v]) => Ok(Value::Float(as_f64(v)?.sqrt())),
        ("len", [Value::Ints(v)]) => Ok(Value::Int(v.len() as i64)),
        ("len", [Value::Tensor(s)]) => Ok(Value::Int(s.len() as i64)),
        ("min", [Value::Int(a), Value::Int(b)]) => Ok(Value::Int(*a.min(b))),
        ("max", [Value::Int(a), Value::Int(b)]) => Ok(Value::Int(*a.max(b))),
        ("min", [a, b]) => Ok(Value::Float(as_f64(a)?.min(as_f64(b)?))),
        ("max", [a, b]) => Ok(Value::Float(as_f64(a)?.max(as_f64(b)?))),
        (f, vals) => Err(format!(
            "{f}() cannot take ({})",
            vals.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn binary(op: Op, a: Value, b: Value) -> Result<Value, String> {
    use Value::{Float, Int};
    let cmp = |ord: Option<std::cmp::Ordering>| -> Result<Value, String> {
        use std::cmp::Ordering::*;
        let o = ord.ok_or_else(|| "cannot order NaN".to_string())?;
        Ok(Value::Bool(match op {
            Op::Lt => o == Less,
            Op::Le => o != Greater,
            Op::Gt => o == Greater,
            Op::Ge => o != Less,
            // Only the ordering ops reach this closure.
            _ => false,
        }))
    };
    match op {
        // Equality works on any two values (`attn_mask == none`, `is_causal == true`); an int
        // and a float compare by value.
        Op::Eq | Op::Ne => {
            let eq = match (&a, &b) {
                (Int(x), Float(y)) | (Float(y), Int(x)) => (*x as f64) == *y,
                _ => a == b,
            };
            Ok(Value::Bool(eq == (op == Op::Eq)))
        }
        Op::Lt | Op::Le | Op::Gt | Op::Ge => match (&a, &b) {
            (Int(x), Int(y)) => cmp(Some(x.cmp(y))),
            _ => cmp(as_f64(&a)?.partial_cmp(&as_f64(&b)?)),
        },
        _ => match (a, b) {
            (Int(x), Int(y)) => match op {
                Op::Add => checked(x.checked_add(y), "+"),
                Op::Sub => checked(x.checked_sub(y), "-"),
                Op::Mul => checked(x.checked_mul(y), "*"),
                Op::Div => checked(x.checked_div_euclid(y), "/"),
                Op::Rem => checked(x.checked_rem_euclid(y), "%"),
                _ => Err(format!("{op:?} is not arithmetic")),
            },
            (a, b) => {
                let (x, y) = (as_f64(&a)?, as_f64(&b)?);
                Ok(Float(match op {
                    Op::Add => x + y,
                    Op::Sub => x - y,
                    Op::Mul => x * y,
                    Op::Div => x / y,
                    Op::Rem => x.rem_euclid(y),
                    _ => return Err(format!("{op:?} is not arithmetic")),
                }))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> HashMap<String, Value> {
        HashMap::from([
            ("q".to_string(), Value::Tensor(vec![8, 12, 1024, 64])),
            ("scale".to_string(), Value::None),
            ("ns".to_string(), Value::Ints(vec![768])),
            ("flag".to_string(), Value::Bool(true)),
            ("approx".to_string(), Value::Str("tanh".into())),
        ])
    }

    fn ev(s: &str) -> Result<Value, String> {
        eval(&parse(s)?, &env())
    }

    #[test]
    fn shapes_strides_and_arithmetic() {
        assert_eq!(ev("q.shape[2]"), Ok(Value::Int(1024)));
        assert_eq!(ev("q.shape[-1]"), Ok(Value::Int(64)));
        assert_eq!(ev("q.stride[1]"), Ok(Value::Int(1024 * 64)));
        assert_eq!(ev("q.stride[3]"), Ok(Value::Int(1)));
        assert_eq!(ev("q.numel / q.shape[-1]"), Ok(Value::Int(8 * 12 * 1024)));
        assert_eq!(ev("cdiv(1000, 128)"), Ok(Value::Int(8)));
        assert_eq!(ev("cdiv(1024, 128)"), Ok(Value::Int(8)));
        assert_eq!(ev("2 + 3 * 4 - -1"), Ok(Value::Int(15)));
        assert_eq!(ev("(2 + 3) * 4 % 7"), Ok(Value::Int(6)));
        assert_eq!(
            ev("default(scale, 1 / sqrt(q.shape[3]))"),
            Ok(Value::Float(0.125))
        );
        assert_eq!(ev("len(ns) == 1"), Ok(Value::Bool(true)));
        assert_eq!(ev("ns[0] == q.shape[-1]"), Ok(Value::Bool(false)));
        assert_eq!(ev("flag == true"), Ok(Value::Bool(true)));
        assert_eq!(ev("scale == none"), Ok(Value::Bool(true)));
        assert_eq!(ev("q.shape[2] % 128 == 0"), Ok(Value::Bool(true)));
        assert_eq!(ev("1e-6 < 1"), Ok(Value::Bool(true)));
        assert_eq!(ev("approx == 'tanh'"), Ok(Value::Bool(true)));
        assert_eq!(ev("approx == \"none\""), Ok(Value::Bool(false)));
    }

    #[test]
    fn errors_name_the_problem() {
        let e = ev("q.shape[4]").expect_err("out of range");
        assert!(e.contains("q.shape[4] is out of range for 4 dims"), "{e}");
        let e = parse("q.shape[2] +").expect_err("truncated");
        assert!(e.contains("expected a value, found the end"), "{e}");
        let e = parse("floor(q.rank)").expect_err("unknown function");
        assert!(e.contains("unknown function `floor`"), "{e}");
        let e = parse("q.size").expect_err("unknown field");
        assert!(e.contains("unknown field `q.size`"), "{e}");
        let e = ev("x + 1").expect_err("unknown name");
        assert!(e.contains("unknown name `x`"), "{e}");
        let e = ev("cdiv(4, 0)").expect_err("zero divisor");
        assert!(e.contains("divisor must be positive"), "{e}");
        let e = ev("9223372036854775807 + 1").expect_err("overflow");
        assert!(e.contains("overflow"), "{e}");
        let e = parse("a == 'none").expect_err("unterminated");
        assert!(e.contains("unterminated string"), "{e}");
        let e = parse("1 2").expect_err("trailing");
        assert!(e.contains("unexpected `2`"), "{e}");
    }
}
