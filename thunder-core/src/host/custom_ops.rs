//! Registering the ops a plugin declares (ABI 1.1), so they can be called from the Rust API
//! and from trace text, print in traces, and fall back to their decomposition.

use super::PluginHost;
use crate::ir::{register_custom_op, CustomOp};
use crate::text::parse_trace;
use std::path::Path;
use thunder_abi::PluginModuleRef;

impl PluginHost {
    /// Registers the plugin's ops; problems become load issues naming the plugin and op.
    pub(super) fn register_custom_ops(
        &mut self,
        module: &PluginModuleRef,
        plugin: &str,
        path: &Path,
    ) -> Vec<String> {
        // Plugins built against ABI 1.0 have neither field.
        let (Some(declare), Some(meta)) = (module.custom_ops(), module.custom_op_meta()) else {
            return Vec::new();
        };
        let mut registered = Vec::new();
        for decl in declare() {
            let id = decl.id.to_string();
            let decomposition = match decl.decomposition.into_option() {
                None => None,
                Some(text) => match parse_trace(&text) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        self.issue(
                            Some(path.to_path_buf()),
                            Some(plugin.to_string()),
                            format!("op `{id}`: its decomposition does not parse: {e}"),
                        );
                        continue;
                    }
                },
            };
            let op = CustomOp {
                plugin: plugin.to_string(),
                description: decl.description.to_string(),
                meta,
                decomposition,
            };
            match register_custom_op(&id, op) {
                Ok(_) => registered.push(id),
                Err(e) => self.issue(
                    Some(path.to_path_buf()),
                    Some(plugin.to_string()),
                    format!("op not registered: {e}"),
                ),
            }
        }
        registered
    }
}
