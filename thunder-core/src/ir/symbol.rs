//! Symbols: a stable string id, what kind of thing it is, and its tags. Prims get their meta
//! from `prims::meta`; composites from tracing their decomposition.

use crate::error::Result;
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::sync::OnceLock;
use thunder_abi::prims::{Prim, PrimClass};

/// Traces the composite's body on proxies; what it records becomes the subsymbols.
pub type Decomposition = fn(&crate::ltorch::CallArgs<'_>) -> Result<Vec<Tensor>>;

#[derive(Clone, Copy)]
pub enum SymbolKind {
    Prim(Prim),
    Composite(Decomposition),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    Elementwise,
    Reduction,
    ShapeOp,
    Matmul,
    Factory,
}

pub struct Symbol {
    pub id: &'static str,
    pub kind: SymbolKind,
    pub tags: &'static [Tag],
}

impl Symbol {
    pub fn prim(&self) -> Option<Prim> {
        match self.kind {
            SymbolKind::Prim(p) => Some(p),
            SymbolKind::Composite(_) => None,
        }
    }

    pub fn is_composite(&self) -> bool {
        matches!(self.kind, SymbolKind::Composite(_))
    }
}

impl std::fmt::Debug for Symbol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Symbol({})", self.id)
    }
}

fn prim_tags(p: Prim) -> &'static [Tag] {
    match p.class() {
        PrimClass::Unary
        | PrimClass::Binary
        | PrimClass::Compare
        | PrimClass::Where
        | PrimClass::Convert => &[Tag::Elementwise],
        PrimClass::Shape => &[Tag::ShapeOp],
        PrimClass::Reduction => &[Tag::Reduction],
        PrimClass::Matmul => &[Tag::Matmul],
        PrimClass::Factory => &[Tag::Factory],
    }
}

fn prim_symbols() -> &'static [Symbol] {
    static SYMBOLS: OnceLock<Vec<Symbol>> = OnceLock::new();
    SYMBOLS.get_or_init(|| {
        Prim::ALL
            .iter()
            .map(|&p| Symbol {
                id: p.id(),
                kind: SymbolKind::Prim(p),
                tags: prim_tags(p),
            })
            .collect()
    })
}

pub fn prim_symbol(p: Prim) -> &'static Symbol {
    // Prim::ALL lists the variants in declaration order, so the discriminant is the index.
    &prim_symbols()[p as usize]
}

/// Finds a symbol by its stable id (`prims.add`, `ltorch.softmax`).
pub fn lookup_symbol(id: &str) -> Option<&'static Symbol> {
    static TABLE: OnceLock<HashMap<&'static str, &'static Symbol>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            prim_symbols()
                .iter()
                .chain(crate::ltorch::symbols().iter())
                .map(|s| (s.id, s))
                .collect()
        })
        .get(id)
        .copied()
}
