//! Symbols: a stable string id, what kind of thing it is, and its tags. Prims get their meta
//! from `prims::meta`; composites from tracing their decomposition.

use crate::error::Result;
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};
use thunder_abi::abi_stable::std_types::{RResult, RSlice, RStr, RVec};
use thunder_abi::prims::{Prim, PrimClass};
use thunder_abi::{ArgView, PluginError, ValueMeta};

/// Traces the composite's body on proxies; what it records becomes the subsymbols.
pub type Decomposition = fn(&crate::ltorch::CallArgs<'_>) -> Result<Vec<Tensor>>;

#[derive(Clone, Copy)]
pub enum SymbolKind {
    Prim(Prim),
    Composite(Decomposition),
    /// Declared by a plugin at load time.
    Custom(&'static CustomOp),
}

/// Shape and dtype rule of a plugin's op, called across the ABI.
pub type CustomMetaFn = extern "C" fn(
    op: RStr<'_>,
    args: RSlice<'_, ArgView>,
    values: RSlice<'_, ValueMeta>,
) -> RResult<RVec<ValueMeta>, PluginError>;

/// An op a plugin added to the language.
pub struct CustomOp {
    pub plugin: String,
    pub description: String,
    pub meta: CustomMetaFn,
    /// Replayed on the op's tensor arguments; `None` means only a claiming executor runs it.
    pub decomposition: Option<crate::ir::Trace>,
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
            SymbolKind::Composite(_) | SymbolKind::Custom(_) => None,
        }
    }

    /// Has subsymbols to fall back on when no executor claims it whole.
    pub fn is_composite(&self) -> bool {
        match self.kind {
            SymbolKind::Composite(_) => true,
            SymbolKind::Custom(op) => op.decomposition.is_some(),
            SymbolKind::Prim(_) => false,
        }
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
        | PrimClass::Predicate
        | PrimClass::Where
        | PrimClass::Convert => &[Tag::Elementwise],
        PrimClass::Shape => &[Tag::ShapeOp],
        PrimClass::Indexing => &[],
        PrimClass::Reduction => &[Tag::Reduction],
        PrimClass::Scan | PrimClass::Sort | PrimClass::Conv => &[],
        PrimClass::Random => &[Tag::Factory],
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

fn custom_symbols() -> &'static RwLock<HashMap<String, &'static Symbol>> {
    static CUSTOM: OnceLock<RwLock<HashMap<String, &'static Symbol>>> = OnceLock::new();
    CUSTOM.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Adds a plugin's op to the language. The same plugin may declare it again (a host loaded
/// twice in one process); another plugin, or a built-in op, may not take its id.
pub fn register_custom_op(id: &str, op: CustomOp) -> Result<&'static Symbol, String> {
    if builtin_symbol(id).is_some() {
        return Err(format!("`{id}` is a built-in op"));
    }
    if id.split('.').count() != 2
        || id
            .split('.')
            .any(|p| p.is_empty() || !p.chars().all(|c| c.is_alphanumeric() || c == '_'))
    {
        return Err(format!(
            "`{id}` is not a valid op id (expected namespace.name)"
        ));
    }
    let mut table = custom_symbols()
        .write()
        .map_err(|_| "the op registry is poisoned".to_string())?;
    if let Some(existing) = table.get(id) {
        if let SymbolKind::Custom(other) = existing.kind {
            if other.plugin != op.plugin {
                return Err(format!(
                    "`{id}` is already declared by plugin `{}`",
                    other.plugin
                ));
            }
        }
    }
    // Symbols live for the whole process, like the plugin libraries that define them.
    let op: &'static CustomOp = Box::leak(Box::new(op));
    let sym: &'static Symbol = Box::leak(Box::new(Symbol {
        id: Box::leak(id.to_string().into_boxed_str()),
        kind: SymbolKind::Custom(op),
        tags: &[],
    }));
    table.insert(id.to_string(), sym);
    Ok(sym)
}

/// Finds a symbol by its stable id (`prims.add`, `ltorch.softmax`, a plugin's `mylib.op`).
/// Every symbol id known now: prims, ltorch ops and the ops plugins declared.
pub fn symbol_ids() -> Vec<String> {
    let mut ids: Vec<String> = prim_symbols()
        .iter()
        .chain(crate::ltorch::symbols().iter())
        .map(|s| s.id.to_string())
        .collect();
    if let Ok(custom) = custom_symbols().read() {
        ids.extend(custom.keys().cloned());
    }
    ids
}

pub fn lookup_symbol(id: &str) -> Option<&'static Symbol> {
    builtin_symbol(id).or_else(|| custom_symbols().read().ok()?.get(id).copied())
}

fn builtin_symbol(id: &str) -> Option<&'static Symbol> {
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
