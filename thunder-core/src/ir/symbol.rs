//! Symbols: a stable string id, what kind of thing it is, and its tags. Prims get their meta
//! from `prims::meta`; composites from tracing their decomposition.

use crate::error::Result;
use crate::ir::{Arg, Signature};
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};
use thunder_abi::abi_stable::std_types::{RResult, RSlice, RStr, RVec};
use thunder_abi::prims::{Prim, PrimClass};
use thunder_abi::{ArgView, PluginError, ValueMeta};

/// Traces the composite's body on proxies; what it records becomes the subsymbols.
pub type Decomposition = fn(&crate::ir::CallArgs<'_>) -> Result<Vec<Tensor>>;

/// A composite's own gradient rule, given its arguments, its outputs and their cotangents (`None`
/// where nothing downstream read an output; at least one is present): one cotangent (or `None`)
/// per argument. Composites without one are differentiated through their decomposition.
pub type CompositeVjp =
    fn(args: &[Arg], outs: &[Tensor], cots: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>>;

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
    /// How callers name its arguments (an op library declares it; prims have none).
    pub signature: Option<&'static Signature>,
    /// Its own VJP, where differentiating its decomposition would not give torch's gradient.
    pub vjp: Option<CompositeVjp>,
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
                signature: None,
                vjp: None,
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
        signature: None,
        vjp: None,
    }));
    table.insert(id.to_string(), sym);
    Ok(sym)
}

/// The registered libraries' symbols, by id and in registration order (listings follow the
/// libraries' own tables).
#[derive(Default)]
struct Library {
    by_id: HashMap<&'static str, &'static Symbol>,
    order: Vec<&'static Symbol>,
}

fn library_symbols() -> &'static RwLock<Library> {
    static LIBRARY: OnceLock<RwLock<Library>> = OnceLock::new();
    LIBRARY.get_or_init(|| RwLock::new(Library::default()))
}

/// Adds an op library's composites (the ltorch library registers itself this way) to the
/// language. Registering the same symbols again is harmless; an id that a prim or another
/// library already took is refused.
pub fn register_library(symbols: &'static [Symbol]) -> Result<(), String> {
    let mut table = library_symbols()
        .write()
        .map_err(|_| "the op registry is poisoned".to_string())?;
    for sym in symbols {
        if prim_symbols().iter().any(|p| p.id == sym.id) {
            return Err(format!("`{}` is a prim", sym.id));
        }
        match table.by_id.get(sym.id) {
            Some(existing) if !std::ptr::eq(*existing, sym) => {
                return Err(format!("`{}` is already registered", sym.id))
            }
            _ => {}
        }
    }
    for sym in symbols {
        if table.by_id.insert(sym.id, sym).is_none() {
            table.order.push(sym);
        }
    }
    Ok(())
}

/// Every symbol id known now: prims, the registered libraries' ops and the ops plugins declared.
pub fn symbol_ids() -> Vec<String> {
    let mut ids: Vec<String> = prim_symbols().iter().map(|s| s.id.to_string()).collect();
    if let Ok(library) = library_symbols().read() {
        ids.extend(library.order.iter().map(|s| s.id.to_string()));
    }
    if let Ok(custom) = custom_symbols().read() {
        ids.extend(custom.keys().cloned());
    }
    ids
}

/// Finds a symbol by its stable id (`prims.add`, `ltorch.softmax`, a plugin's `mylib.op`).
pub fn lookup_symbol(id: &str) -> Option<&'static Symbol> {
    builtin_symbol(id).or_else(|| custom_symbols().read().ok()?.get(id).copied())
}

fn builtin_symbol(id: &str) -> Option<&'static Symbol> {
    static PRIMS: OnceLock<HashMap<&'static str, &'static Symbol>> = OnceLock::new();
    PRIMS
        .get_or_init(|| prim_symbols().iter().map(|s| (s.id, s)).collect())
        .get(id)
        .copied()
        .or_else(|| library_symbols().read().ok()?.by_id.get(id).copied())
}
