//! Options every subcommand shares: which config, extra plugin folders, executor order.

use anyhow::Result;
use std::path::PathBuf;
use thunder_core::host::Config;
use thunder_core::PluginHost;

#[derive(clap::Args)]
pub struct HostArgs {
    /// plugins.toml to use (default: $THUNDER_CONFIG, else ./plugins.toml, else the binary's folder).
    #[arg(long, global = true, env = "THUNDER_CONFIG")]
    pub config: Option<PathBuf>,
    /// An extra folder to load plugins from.
    #[arg(long = "plugin-dir", global = true)]
    pub plugin_dirs: Vec<PathBuf>,
    /// Only these executors, asked in this order (comma-separated).
    #[arg(long, global = true, env = "THUNDER_EXECUTORS", value_delimiter = ',')]
    pub executors: Vec<String>,
}

impl HostArgs {
    pub fn host(&self) -> Result<PluginHost> {
        let mut dirs = self.plugin_dirs.clone();
        let config = match &self.config {
            Some(path) => Config::load(path)?,
            None if std::path::Path::new("plugins.toml").exists() => {
                Config::load(std::path::Path::new("plugins.toml"))?
            }
            None => {
                if let Some(dir) = std::env::current_exe()
                    .ok()
                    .and_then(|e| e.parent().map(PathBuf::from))
                {
                    dirs.push(dir);
                }
                Config::default()
            }
        };
        let mut host = PluginHost::load(&config, &dirs);
        if !self.executors.is_empty() {
            let names: Vec<&str> = self.executors.iter().map(String::as_str).collect();
            host.restrict_to(&names)?;
        }
        Ok(host)
    }
}
