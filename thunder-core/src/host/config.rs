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
    /// Pin of the library's exact build.
    pub sha256: Option<String>,
    #[serde(default)]
    pub options: toml::Table,
}

fn yes() -> bool {
    true
}

impl Config {
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let mut config: Config = toml::from_str(text).map_err(|e| {
            let message = e.message().to_string();
            let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
            // toml names an unknown key in backticks; for a wrong type it points at the value,
            // so the key is what precedes `=` on that line.
            let key_at_span = e.span().and_then(|s| {
                let line = text.lines().nth(line_of(s.start) - 1)?;
                line.split_once('=').map(|(k, _)| k.trim().to_string())
            });
            let field = message
                .split('`')
                .nth(1)
                .map(str::to_string)
                .or(key_at_span)
                .unwrap_or_else(|| "<document>".into());
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
