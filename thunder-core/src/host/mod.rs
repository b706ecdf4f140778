//! The plugin host: reads `plugins.toml`, loads executor plugins, and keeps them in priority
//! order. It never names an executor; what runs where is decided by claiming.

pub mod config;
mod custom_ops;
pub mod exec_trace;
mod loader;
pub mod partition;
pub mod services;
mod trust;
pub mod view;

pub use config::{Config, ExecutorConfig};
pub use thunder_abi::{AbiVersion, ABI_VERSION as HOST_ABI_VERSION};

use crate::error::{Error, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thunder_abi::abi_stable::std_types::{RResult, RString, RVec, Tuple2};
use thunder_abi::{ExecutorBox, OptionValue, PluginOption};

/// One loaded executor, in the order the host asks it to claim.
pub struct ExecutorEntry {
    pub name: String,
    pub version: String,
    pub abi_version: AbiVersion,
    pub description: String,
    pub devices: Vec<String>,
    pub symbols: Vec<String>,
    pub path: PathBuf,
    pub priority: i64,
    /// Listed in plugins.toml (as opposed to found in a plugin folder).
    pub listed: bool,
    pub enabled: bool,
    /// `Err(reason)` when the plugin says it cannot run here.
    pub available: std::result::Result<(), String>,
    /// Ids of the ops this plugin added to the language.
    pub custom_ops: Vec<String>,
    /// `run_fallback` from plugins.toml: a failed `run` re-runs without this executor.
    pub run_fallback: bool,
    /// `skip` from plugins.toml: symbols this executor is never asked to claim.
    pub skip: Vec<String>,
    /// Shared with compiled programs, which may partition again after a run failure.
    pub(crate) executor: Option<Arc<ExecutorBox>>,
}

impl ExecutorEntry {
    /// Asked to claim: enabled, created and available.
    pub fn is_active(&self) -> bool {
        self.enabled && self.available.is_ok() && self.executor.is_some()
    }
}

/// Something that went wrong while loading: reported by `thunder plugins`, never fatal.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadIssue {
    pub path: Option<PathBuf>,
    pub executor: Option<String>,
    pub message: String,
}

pub struct PluginHost {
    entries: Vec<ExecutorEntry>,
    issues: Vec<LoadIssue>,
    /// Whether programs compiled with this host replay as CUDA graphs (see
    /// [`Config::cuda_graphs`]).
    cuda_graphs: bool,
}

fn option_value(key: &str, v: &toml::Value) -> std::result::Result<OptionValue, String> {
    Ok(match v {
        toml::Value::Boolean(b) => OptionValue::Bool(*b),
        toml::Value::Integer(i) => OptionValue::Int(*i),
        toml::Value::Float(x) => OptionValue::Float(*x),
        toml::Value::String(s) => OptionValue::Str(RString::from(s.as_str())),
        other => {
            return Err(format!(
                "option `{key}` must be a bool, integer, float or string, got {}",
                other.type_str()
            ))
        }
    })
}

fn sha256_hex(path: &Path) -> std::result::Result<String, String> {
    use sha2::Digest;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    Ok(format!("{:x}", sha2::Sha256::digest(bytes)))
}

fn is_library(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("so" | "dylib" | "dll")
    )
}

impl PluginHost {
    /// A host with no executors (everything fails to claim); useful for tracing only.
    pub fn empty() -> PluginHost {
        PluginHost {
            entries: Vec::new(),
            issues: Vec::new(),
            cuda_graphs: true,
        }
    }

    /// Loads every plugin the config names or its folders hold. Problems become
    /// [`LoadIssue`]s; only an unreadable config is an error.
    pub fn load(config: &Config, extra_dirs: &[PathBuf]) -> PluginHost {
        let mut host = PluginHost::empty();
        host.cuda_graphs = config.cuda_graphs.unwrap_or(true);
        let mut seen_paths = HashSet::new();
        // Each candidate library, with the index of the listed executor naming it as `library`.
        let mut candidates: Vec<(PathBuf, Option<usize>)> = Vec::new();
        for (i, e) in config.executors.iter().enumerate() {
            if let Some(lib) = &e.library {
                let p = config.resolve(lib);
                if !p.exists() {
                    host.issue(
                        Some(p.clone()),
                        Some(e.name.clone()),
                        format!("executor[{i}].library: file not found"),
                    );
                }
                candidates.push((p, Some(i)));
            }
        }
        let dirs = config
            .plugin_dirs
            .iter()
            .map(|d| config.resolve(d))
            .chain(extra_dirs.iter().cloned());
        for dir in dirs {
            let Ok(read) = std::fs::read_dir(&dir) else {
                tracing::debug!(dir = %dir.display(), "plugin folder not found");
                continue;
            };
            if !config.allow_writable_plugins {
                if let Err(e) = trust::check_folder(&dir) {
                    host.issue(Some(dir), None, e);
                    continue;
                }
            }
            let mut files: Vec<PathBuf> = read
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| is_library(p))
                .collect();
            files.sort();
            candidates.extend(files.into_iter().map(|f| (f, None)));
        }
        let listed_min = config
            .executors
            .iter()
            .map(|e| e.priority)
            .min()
            .unwrap_or(0);
        // Listed executors whose library was refused before loading (already reported).
        let mut refused: HashSet<usize> = HashSet::new();
        for (path, listed) in candidates {
            let key = path.canonicalize().unwrap_or_else(|_| path.clone());
            if !path.exists() || !seen_paths.insert(key) {
                continue;
            }
            let pinned = listed.map(|i| (i, &config.executors[i]));
            if let Err(e) = trust::vet(&path, pinned, config.allow_writable_plugins) {
                host.issue(Some(path), pinned.map(|(_, cfg)| cfg.name.clone()), e);
                refused.extend(listed);
                continue;
            }
            host.load_one(&path, config, listed_min - 1);
        }
        for (i, e) in config.executors.iter().enumerate() {
            if !refused.contains(&i) && !host.entries.iter().any(|x| x.name == e.name) {
                host.issue(
                    None,
                    Some(e.name.clone()),
                    format!(
                        "executor[{i}] `{}` is listed but no plugin of that name was found",
                        e.name
                    ),
                );
            }
        }
        host.sort();
        host
    }

    fn issue(&mut self, path: Option<PathBuf>, executor: Option<String>, message: String) {
        tracing::warn!(path = ?path, executor = ?executor, "{message}");
        self.issues.push(LoadIssue {
            path,
            executor,
            message,
        });
    }

    fn load_one(&mut self, path: &Path, config: &Config, default_priority: i64) {
        let version = match loader::probe(path) {
            Err(e) => return self.issue(Some(path.to_path_buf()), None, e),
            Ok(loader::Probe::NotAPlugin) => {
                tracing::debug!(path = %path.display(), "skipped: not a thunder plugin");
                return;
            }
            Ok(loader::Probe::Plugin(v)) => v,
        };
        let module = match loader::load_module(path, version) {
            Ok(m) => m,
            Err(e) => return self.issue(Some(path.to_path_buf()), None, e),
        };
        let info = (module.info())();
        let name = info.name.to_string();
        if self.entries.iter().any(|e| e.name == name) {
            return self.issue(
                Some(path.to_path_buf()),
                Some(name.clone()),
                format!("a plugin named `{name}` is already loaded; this one is skipped"),
            );
        }
        let listed = config
            .executors
            .iter()
            .enumerate()
            .find(|(_, e)| e.name == name);
        let mut entry = ExecutorEntry {
            name: name.clone(),
            version: info.version.to_string(),
            abi_version: info.abi_version,
            description: info.description.to_string(),
            devices: info.devices.iter().map(|s| s.to_string()).collect(),
            symbols: info.symbols.iter().map(|s| s.to_string()).collect(),
            path: path.to_path_buf(),
            priority: listed.map_or(default_priority, |(_, e)| e.priority),
            listed: listed.is_some(),
            enabled: listed.is_none_or(|(_, e)| e.enabled),
            available: Err("not created".into()),
            custom_ops: Vec::new(),
            run_fallback: listed.is_some_and(|(_, e)| e.run_fallback),
            skip: listed.map_or_else(Vec::new, |(_, e)| e.skip.clone()),
            executor: None,
        };
        for s in entry.skip.iter().filter(|s| !entry.symbols.contains(s)) {
            // Not an error: a plugin may claim symbols it does not list (prims it fuses).
            tracing::warn!(
                executor = %name,
                "plugins.toml `skip`: `{s}` is not among the symbols `{name}` lists; if it is misspelt, the skip has no effect"
            );
        }
        let mut options: RVec<PluginOption> = RVec::new();
        if let Some((i, cfg)) = listed {
            if let Err(e) = self.check_pins(i, cfg, &entry) {
                entry.available = Err(e.clone());
                entry.enabled = false;
                self.issue(Some(path.to_path_buf()), Some(name), e);
                self.entries.push(entry);
                return;
            }
            for (k, v) in &cfg.options {
                match option_value(k, v) {
                    Ok(v) => options.push(Tuple2(RString::from(k.as_str()), v)),
                    Err(e) => self.issue(
                        Some(path.to_path_buf()),
                        Some(name.clone()),
                        format!("executor[{i}].options: {e}"),
                    ),
                }
            }
        }
        entry.custom_ops = self.register_custom_ops(&module, &name, path);
        if entry.enabled {
            match (module.create())(services::host_services(), options) {
                RResult::ROk(exec) => {
                    entry.available = exec.available().into_result().map_err(|r| r.to_string());
                    entry.executor = Some(Arc::new(exec));
                }
                RResult::RErr(e) => {
                    entry.available = Err(format!("create failed: {e}"));
                    self.issue(
                        Some(path.to_path_buf()),
                        Some(name),
                        format!("create failed: {e}"),
                    );
                }
            }
        } else {
            entry.available = Err("disabled in plugins.toml".into());
        }
        self.entries.push(entry);
    }

    fn check_pins(
        &self,
        i: usize,
        cfg: &ExecutorConfig,
        entry: &ExecutorEntry,
    ) -> std::result::Result<(), String> {
        if let Some(req) = &cfg.requires {
            let req = semver::VersionReq::parse(req)
                .map_err(|e| format!("executor[{i}].requires: {e}"))?;
            let version = semver::Version::parse(&entry.version)
                .map_err(|e| format!("plugin version `{}` is not semver: {e}", entry.version))?;
            if !req.matches(&version) {
                return Err(format!(
                    "executor[{i}].requires: plugin version {version} does not satisfy `{req}`"
                ));
            }
        }
        if let Some(want) = &cfg.sha256 {
            let got = sha256_hex(&entry.path)?;
            if !got.eq_ignore_ascii_case(want) {
                return Err(format!(
                    "executor[{i}].sha256: library hash {got} does not match the pinned {want}"
                ));
            }
        }
        Ok(())
    }

    fn sort(&mut self) {
        self.entries.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.name.cmp(&b.name))
        });
    }

    /// Loads from a config file.
    pub fn from_config_file(path: &Path, extra_dirs: &[PathBuf]) -> Result<PluginHost> {
        Ok(PluginHost::load(&Config::load(path)?, extra_dirs))
    }

    /// The default host: `$THUNDER_CONFIG`, else `./plugins.toml`, else the folder of the
    /// running executable; `$THUNDER_EXECUTORS` restricts and orders executors for one run.
    pub fn from_env() -> Result<PluginHost> {
        let mut host = match std::env::var_os("THUNDER_CONFIG") {
            Some(p) => PluginHost::from_config_file(Path::new(&p), &[])?,
            None if Path::new("plugins.toml").exists() => {
                PluginHost::from_config_file(Path::new("plugins.toml"), &[])?
            }
            None => {
                let dirs: Vec<PathBuf> = std::env::current_exe()
                    .ok()
                    .and_then(|e| e.parent().map(Path::to_path_buf))
                    .into_iter()
                    .collect();
                PluginHost::load(&Config::default(), &dirs)
            }
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
        Ok(host)
    }

    /// Whether cached CUDA programs replay as CUDA graphs (`cuda_graphs` in plugins.toml,
    /// `$THUNDER_CUDA_GRAPHS`; on by default).
    pub fn cuda_graphs(&self) -> bool {
        self.cuda_graphs
    }

    /// Applies `$THUNDER_CUDA_GRAPHS` (0/1, false/true, off/on) over the config's `cuda_graphs`.
    pub fn apply_cuda_graphs_env(&mut self) -> Result<()> {
        let Ok(v) = std::env::var("THUNDER_CUDA_GRAPHS") else {
            return Ok(());
        };
        self.cuda_graphs = match v.trim() {
            "0" | "false" | "off" => false,
            "1" | "true" | "on" | "" => true,
            other => {
                return Err(Error::Usage(format!(
                    "THUNDER_CUDA_GRAPHS: expected 0 or 1 (or false/true), got `{other}`"
                )))
            }
        };
        Ok(())
    }

    /// Keeps only the named executors, asked in the given order.
    pub fn restrict_to(&mut self, names: &[&str]) -> Result<()> {
        for n in names {
            if !self.entries.iter().any(|e| e.name == *n) {
                let known: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
                return Err(Error::Usage(format!(
                    "unknown executor `{n}` in the executor list; loaded: {}",
                    known.join(", ")
                )));
            }
        }
        let count = names.len() as i64;
        for e in &mut self.entries {
            match names.iter().position(|n| *n == e.name) {
                Some(pos) => e.priority = count - pos as i64,
                None => e.enabled = false,
            }
        }
        self.sort();
        Ok(())
    }

    pub fn entries(&self) -> &[ExecutorEntry] {
        &self.entries
    }

    pub fn issues(&self) -> &[LoadIssue] {
        &self.issues
    }
}
