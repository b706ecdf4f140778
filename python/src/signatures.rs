//! The op table's ltorch signatures for the Python tracer: `signatures()` lists them (names,
//! declared types, defaults, keyword-only parameters) and `bind()` binds a torch call's
//! arguments with thunder-core's own binder, so torch's keyword names and defaults come from
//! one place, the op table (`thunder_torch::signature`), for the trace text and Python
//! alike.
//!
//! Arguments cross as the tagged tuples of `program.rs` (`("v", value)`, `("i", 1)`, ...) plus
//! `("T", [values])` for a list of tensors (`cat`, `stack`).

use crate::program::{parse_arg, OpArg};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use thunder_core::ir::{Arg, Value};
use thunder_torch::{self as ltorch, Given};

fn value(v: usize) -> PyResult<Arg> {
    u32::try_from(v)
        .map(|v| Arg::Value(Value(v)))
        .map_err(|_| PyValueError::new_err(format!("value number {v} is out of range")))
}

fn given(a: &Bound<'_, PyAny>) -> PyResult<Given> {
    let tag: String = a.get_item(0)?.extract()?;
    if tag == "T" {
        let vs: Vec<usize> = a.get_item(1)?.extract()?;
        return Ok(Given::Tensors(
            vs.into_iter().map(value).collect::<PyResult<_>>()?,
        ));
    }
    Ok(Given::One(match parse_arg(a)? {
        OpArg::Value(v) => value(v)?,
        OpArg::Lit(l) => l,
    }))
}

/// An [`Arg`] as the tagged tuple the tracer records.
pub fn tagged<'py>(py: Python<'py>, a: &Arg) -> PyResult<Bound<'py, PyTuple>> {
    match a {
        Arg::Value(v) => ("v", v.0).into_pyobject(py),
        Arg::Int(i) => ("i", *i).into_pyobject(py),
        Arg::Float(f) => ("f", *f).into_pyobject(py),
        Arg::Bool(b) => ("b", *b).into_pyobject(py),
        Arg::Ints(v) => ("I", v.clone()).into_pyobject(py),
        Arg::DType(d) => ("d", d.short_name()).into_pyobject(py),
        Arg::Device(d) => ("D", d.to_string()).into_pyobject(py),
        Arg::Str(s) => ("s", s.clone()).into_pyobject(py),
        Arg::None => PyTuple::new(py, ["n"]),
    }
}

/// Every ltorch op's signature from the op table: `{"ltorch.softmax": [param, ...]}`, each
/// param a dict with `name`, `type` (as declared, `int|list[int]`), `optional` (takes None),
/// `default` (a tagged argument, absent when required) and `keyword_only`.
#[pyfunction]
pub fn signatures(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let out = PyDict::new(py);
    for sig in ltorch::signatures() {
        let params = PyList::empty(py);
        for p in &sig.params {
            let d = PyDict::new(py);
            d.set_item("name", p.name)?;
            d.set_item("type", p.ty)?;
            d.set_item("optional", p.optional)?;
            d.set_item("keyword_only", p.keyword_only)?;
            if let Some(def) = &p.default {
                d.set_item("default", tagged(py, def)?)?;
            }
            params.append(d)?;
        }
        out.set_item(sig.op, params)?;
    }
    Ok(out.into_any().unbind())
}

/// Binds a call of the ltorch op `symbol` (tagged positional and `(name, tagged)` keyword
/// arguments) with its declared signature, as the trace parser does: the canonical argument
/// list (tagged), torch's defaults filled in. A call that does not fit is a `TypeError` with
/// the binder's words (the parameter, what it takes, the signature).
#[pyfunction]
pub fn bind(
    py: Python<'_>,
    symbol: &str,
    positional: &Bound<'_, PyList>,
    keywords: &Bound<'_, PyList>,
) -> PyResult<Py<PyAny>> {
    let sig = ltorch::signature(symbol)
        .ok_or_else(|| PyValueError::new_err(format!("{symbol} has no declared signature")))?;
    let pos = positional
        .iter()
        .map(|a| given(&a))
        .collect::<PyResult<Vec<_>>>()?;
    let mut kws = Vec::with_capacity(keywords.len());
    for kw in keywords.iter() {
        let name: String = kw.get_item(0)?.extract()?;
        kws.push((name, given(&kw.get_item(1)?)?));
    }
    let args = sig
        .bind(pos, kws)
        .map_err(|e| PyTypeError::new_err(e.to_string()))?;
    let out = PyList::empty(py);
    for a in &args {
        out.append(tagged(py, a)?)?;
    }
    Ok(out.into_any().unbind())
}
