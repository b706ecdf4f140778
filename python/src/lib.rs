//! `thunder_rs._native`: the PyO3 extension under the `thunder_rs` Python package. The tracer
//! (torch calls to ltorch) is Python, in `python/thunder_rs/`; this crate compiles what it
//! recorded and runs it on DLPack tensors.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

mod dlpack;
mod host;
mod program;
mod signatures;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// Sets the `plugins.toml` used when `$THUNDER_CONFIG` is not set (the package's own).
#[pyfunction]
fn set_default_config(path: PathBuf) {
    host::set_default_config(path);
}

/// The executors as `thunder plugins --json` lists them: a dict with `executors` and
/// `load_errors`.
#[pyfunction]
fn plugins(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let host = host::host().map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let out = PyDict::new(py);
    let mut execs = Vec::new();
    for e in host.entries() {
        let d = PyDict::new(py);
        d.set_item("name", &e.name)?;
        d.set_item("version", &e.version)?;
        d.set_item("abi_version", e.abi_version.to_string())?;
        d.set_item("path", e.path.display().to_string())?;
        d.set_item("priority", e.priority)?;
        d.set_item("listed", e.listed)?;
        d.set_item("enabled", e.enabled)?;
        d.set_item("available", e.available.is_ok())?;
        d.set_item("unavailable_reason", e.available.as_ref().err())?;
        d.set_item("devices", &e.devices)?;
        d.set_item("symbols", e.symbols.len())?;
        d.set_item("description", &e.description)?;
        d.set_item("custom_ops", &e.custom_ops)?;
        execs.push(d);
    }
    out.set_item("executors", execs)?;
    let issues: Vec<(Option<String>, Option<String>, String)> = host
        .issues()
        .iter()
        .map(|i| {
            (
                i.path.as_ref().map(|p| p.display().to_string()),
                i.executor.clone(),
                i.message.clone(),
            )
        })
        .collect();
    out.set_item("load_errors", issues)?;
    Ok(out.into_any().unbind())
}

/// Every ltorch symbol id the tracer may call.
#[pyfunction]
fn ltorch_symbols() -> Vec<&'static str> {
    thunder_torch::symbols().iter().map(|s| s.id).collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    thunder_torch::register();
    m.add_class::<program::Program>()?;
    m.add_class::<program::Saved>()?;
    m.add_function(wrap_pyfunction!(set_default_config, m)?)?;
    m.add_function(wrap_pyfunction!(plugins, m)?)?;
    m.add_function(wrap_pyfunction!(ltorch_symbols, m)?)?;
    m.add_function(wrap_pyfunction!(signatures::signatures, m)?)?;
    m.add_function(wrap_pyfunction!(signatures::bind, m)?)?;
    Ok(())
}
