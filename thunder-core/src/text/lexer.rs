//! Tokens of one line of trace text, with the column each starts at.

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A name, possibly dotted (`ltorch.add`, `dtypes.f32`).
    Ident(String),
    Int(i64),
    Float(f64),
    Str(String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Equals,
    Colon,
    /// Start of a trailing comment; the rest of the line is its text.
    Comment(String),
}

#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    pub column: usize,
}

pub fn lex(line: &str, line_no: usize) -> Result<Vec<Token>> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |column: usize, message: String| Error::Parse {
        line: line_no,
        column,
        message,
    };
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        let single = match c {
            '(' => Some(Tok::LParen),
            ')' => Some(Tok::RParen),
            '[' => Some(Tok::LBracket),
            ']' => Some(Tok::RBracket),
            ',' => Some(Tok::Comma),
            '=' => Some(Tok::Equals),
            ':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(tok) = single {
            out.push(Token { tok, column });
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '#' {
            let text: String = chars[i + 1..].iter().collect();
            out.push(Token {
                tok: Tok::Comment(text.trim().to_string()),
                column,
            });
            break;
        } else if c == '"' || c == '\'' {
            // Python strings, single- or double-quoted.
            let quote = c;
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(err(column, "unterminated string".into())),
                    Some(&q) if q == quote => break,
                    Some('\\') => {
                        match chars.get(i + 1) {
                            Some(&e @ ('"' | '\'' | '\\')) => s.push(e),
                            _ => return Err(err(i + 1, "unknown escape in string".into())),
                        }
                        i += 2;
                        continue;
                    }
                    Some(&ch) => s.push(ch),
                }
                i += 1;
            }
            out.push(Token {
                tok: Tok::Str(s),
                column,
            });
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '-'
                && chars
                    .get(i + 1)
                    .is_some_and(|n| n.is_ascii_digit() || *n == 'i'))
        {
            let start = i;
            i += 1;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '.' | '_' | '+' | '-'))
            {
                // A sign is part of the number only right after an exponent marker.
                if matches!(chars[i], '+' | '-') && !matches!(chars[i - 1], 'e' | 'E') {
                    break;
                }
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let tok = if text == "-inf" {
                Tok::Float(f64::NEG_INFINITY)
            } else if text.contains(['.', 'e', 'E']) {
                Tok::Float(
                    text.parse()
                        .map_err(|_| err(column, format!("invalid number `{text}`")))?,
                )
            } else {
                Tok::Int(
                    text.parse()
                        .map_err(|_| err(column, format!("invalid integer `{text}`")))?,
                )
            };
            out.push(Token { tok, column });
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '.')) {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let tok = match text.as_str() {
                "inf" => Tok::Float(f64::INFINITY),
                "nan" => Tok::Float(f64::NAN),
                _ => Tok::Ident(text),
            };
            out.push(Token { tok, column });
        } else {
            return Err(err(column, format!("unexpected character `{c}`")));
        }
    }
    Ok(out)
}
