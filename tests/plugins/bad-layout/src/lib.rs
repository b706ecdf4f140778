//! Exports the thunder entry symbol with the host's ABI version, so the cheap version check
//! passes, but its abi_stable root module is a `PluginModule` of another layout: `info` returns
//! a number instead of a `PluginInfo`. abi_stable's layout check must catch it before the host
//! calls anything in the module.
// sabi's derive expands to impls of foreign traits inside the type's scope.
#![allow(non_local_definitions)]

use abi_stable::{
    declare_root_module_statics, export_root_module, library::RootModule, package_version_strings,
    prefix_type::PrefixTypeTrait, sabi_types::VersionStrings, StableAbi,
};
use thunder_abi::{AbiVersion, ABI_VERSION};

#[no_mangle]
pub extern "C" fn thunder_plugin_abi_version() -> u64 {
    ABI_VERSION.pack()
}

/// Named and shaped like thunder-abi's `PluginModule`, with `info` of another type.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    pub abi_version: AbiVersion,
    #[sabi(last_prefix_field)]
    pub info: extern "C" fn() -> u64,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "thunder_plugin";
    const NAME: &'static str = "thunder_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

extern "C" fn info() -> u64 {
    42
}

#[export_root_module]
pub fn root_module() -> PluginModuleRef {
    PluginModule {
        abi_version: ABI_VERSION,
        info,
    }
    .leak_into_prefix()
}
