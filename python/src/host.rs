//! The plugin host the extension uses, loaded once per process.
//!
//! Where plugins come from, first match wins: `$THUNDER_CONFIG` (a `plugins.toml`), else the
//! `plugins.toml` shipped in the package, whose plugin folder is the package's `plugins/`
//! (the wheel carries the executor libraries there). Folders in `$THUNDER_PLUGIN_DIR`
//! (separated by `:`) are searched too. `$THUNDER_EXECUTORS` picks executors and
//! `$THUNDER_CUDA_GRAPHS` switches graph replay, as for the CLI.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use thunder_core::host::Config;
use thunder_core::{Error, PluginHost, Result};

static HOST: OnceLock<std::result::Result<Arc<PluginHost>, Error>> = OnceLock::new();
static DEFAULT_CONFIG: OnceLock<PathBuf> = OnceLock::new();

/// Called by the package on import with the path of its bundled `plugins.toml`.
pub fn set_default_config(path: PathBuf) {
    let _ = DEFAULT_CONFIG.set(path);
}

fn load() -> Result<PluginHost> {
    let extra: Vec<PathBuf> = std::env::var_os("THUNDER_PLUGIN_DIR")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    let mut host = match std::env::var_os("THUNDER_CONFIG") {
        Some(p) => PluginHost::from_config_file(std::path::Path::new(&p), &extra)?,
        None => match DEFAULT_CONFIG.get() {
            Some(p) => PluginHost::from_config_file(p, &extra)?,
            None => PluginHost::load(&Config::default(), &extra),
        },
    };
    host.apply_cuda_graphs_env()?;
    if let Ok(list) = std::env::var("THUNDER_EXECUTORS") {
        let names: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        host.restrict_to(&names)?;
    }
    tracing::debug!(
        executors = host.entries().len(),
        "thunder_rs plugin host loaded"
    );
    Ok(host)
}

pub fn host() -> Result<Arc<PluginHost>> {
    HOST.get_or_init(|| load().map(Arc::new)).clone()
}
