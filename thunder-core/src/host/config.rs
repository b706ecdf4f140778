//! `plugins.toml`: plugin folders and the executors to use, in priority order.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Folders whose `.so` files that export the thunder entry symbol are loaded.
    #[serde(default)]
    pub plugin_dirs: Vec<String>,
    #[serde(default, rename = "executor")]
    pub executors: Vec<ExecutorConfig>,
    /// Load plugin files and folders that users other than the owner may write to. Off by
    /// default: such a file could be swapped for arbitrary code (ssh refuses loose key
    /// permissions for the same reason). Unix only; elsewhere nothing is checked.
    #[serde(default)]
    pub allow_writable_plugins: bool,
    /// Replay cached CUDA programs as CUDA graphs where their inputs' addresses allow it
    /// (default true; `$THUNDER_CUDA_GRAPHS=0` turns it off for one run).
    pub cuda_graphs: Option<bool>,
    /// Where the file was read from; relative paths in it are relative to its folder.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorConfig {
    pub name: String,
    /// Higher asks first.
    #[serde(default)]
    pub priority: i64,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Semver requirement on the plugin's own version, e.g. `^0.1`.
    pub requires: Option<String>,
    /// Explicit path of the plugin's library.
    pub library: Option<String>,
    /// Pin of the library's exact build. With `library` set it is checked before the library
    /// is loaded, so no code of another build runs.
    pub sha256: Option<String>,
    /// When a region of this executor fails in `run`, compile the program again without it and
    /// re-run on the next executors (with a warning) instead of returning the error.
    #[serde(default)]
    pub run_fallback: bool,
    /// Symbols this executor is never asked to claim (`skip = ["ltorch.rms_norm"]`): the next
    /// executors get them, or, for a composite nobody claims, its decomposition.
    #[serde(default)]
    pub skip: Vec<String>,
    #[serde(default)]
    pub options: toml::Table,
}

fn yes() -> bool {
    true
}

impl Config {
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let mut config: Config = toml::from_str(text).map_err(|e| {
            // toml's syntax errors span lines ("invalid table header\nexpected `.`"): keep one.
            let message = e.message().trim().replace('\n', ": ");
            let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
            // toml names an unknown key in backticks; for a wrong type it points at the value,
            // so the key is what precedes `=` on that line.
            let key_at_span = e.span().and_then(|s| {
                let line = text.lines().nth(line_of(s.start) - 1)?;
                line.split_once('=').map(|(k, _)| k.trim().to_string())
            });
            let named = ["field `", "key `", "variant `"]
                .iter()
                .find_map(|p| message.split_once(p))
                .and_then(|(_, rest)| rest.split('`').next())
                .map(str::to_string);
            let field = named.or(key_at_span).unwrap_or_else(|| "<document>".into());
            let at = e
                .span()
                .map(|s| format!(" (line {})", line_of(s.start)))
                .unwrap_or_default();
            Error::Config {
                path: path.to_path_buf(),
                field,
                message: format!("{message}{at}"),
            }
        })?;
        for (i, e) in config.executors.iter().enumerate() {
            if let Some(req) = &e.requires {
                semver::VersionReq::parse(req).map_err(|err| Error::Config {
                    path: path.to_path_buf(),
                    field: format!("executor[{i}].requires"),
                    message: format!("`{req}` is not a semver requirement: {err}"),
                })?;
            }
            if let Some(sha) = &e.sha256 {
                if sha.len() != 64 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
                    return Err(Error::Config {
                        path: path.to_path_buf(),
                        field: format!("executor[{i}].sha256"),
                        message: format!("expected 64 hex digits, got `{sha}`"),
                    });
                }
            }
        }
        config.source = Some(path.to_path_buf());
        Ok(config)
    }

    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::File {
            path: path.to_path_buf(),
            message: format!("cannot read: {e}"),
        })?;
        Config::parse(&text, path)
    }

    /// A path from the config, with `~` expanded and relative paths taken from its folder.
    pub fn resolve(&self, path: &str) -> PathBuf {
        if let Some(rest) = path.strip_prefix("~/") {
            if let Some(home) = std::env::var_os("HOME") {
                return PathBuf::from(home).join(rest);
            }
        }
        let p = PathBuf::from(path);
        match (&self.source, p.is_relative()) {
            (Some(src), true) => src.parent().map_or(p.clone(), |dir| dir.join(&p)),
            _ => p,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_names_the_field() {
        let err = Config::parse(
            "[[executor]]\nname = \"a\"\npriorty = 3\n",
            Path::new("p.toml"),
        )
        .unwrap_err();
        match err {
            Error::Config { field, message, .. } => {
                assert_eq!(field, "priorty");
                assert!(message.contains("line 3"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn wrong_type_names_the_field() {
        let err = Config::parse(
            "[[executor]]\nname = \"a\"\npriority = \"high\"\n",
            Path::new("p.toml"),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("p.toml: field `priority`") && text.contains("line 3"),
            "{text}"
        );
    }

    #[test]
    fn bad_semver_requirement_is_rejected() {
        let err = Config::parse(
            "[[executor]]\nname = \"a\"\nrequires = \"lots\"\n",
            Path::new("p.toml"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("executor[0].requires"), "{err}");
    }

    #[test]
    fn trust_and_fallback_switches_default_off() {
        let c = Config::parse("[[executor]]\nname = \"a\"\n", Path::new("p.toml")).unwrap();
        assert!(!c.allow_writable_plugins && !c.executors[0].run_fallback);
        let c = Config::parse(
            "allow_writable_plugins = true\n[[executor]]\nname = \"a\"\nrun_fallback = true\n",
            Path::new("p.toml"),
        )
        .unwrap();
        assert!(c.allow_writable_plugins && c.executors[0].run_fallback);
    }

    #[test]
    fn cuda_graphs_default_on_and_the_config_turns_them_off() {
        let host = |text: &str| {
            let c = Config::parse(text, Path::new("p.toml")).unwrap();
            crate::PluginHost::load(&c, &[]).cuda_graphs()
        };
        assert!(host(""));
        assert!(!host("cuda_graphs = false\n"));
        assert!(host("cuda_graphs = true\n"));
        let err = Config::parse("cuda_graphs = 1\n", Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("cuda_graphs"), "{err}");
    }

    #[test]
    fn syntax_errors_name_the_line_on_one_line() {
        let err = Config::parse("[[executor]\nname = \"a\"\n", Path::new("p.toml")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("p.toml: field `<document>`: invalid table header")
                && text.contains("(line 1)")
                && !text.contains('\n'),
            "{text}"
        );
    }

    #[test]
    fn relative_paths_resolve_from_the_config_folder() {
        let c = Config::parse(
            "plugin_dirs = [\"plugins\"]\n",
            Path::new("/etc/thunder/plugins.toml"),
        )
        .unwrap();
        assert_eq!(
            c.resolve(&c.plugin_dirs[0]),
            PathBuf::from("/etc/thunder/plugins")
        );
    }
}
