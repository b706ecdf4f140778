//! Exports the thunder entry symbol with ABI version 2.0.0, so the host (ABI 1.x) must refuse
//! it with a message naming both versions, before trusting any other symbol.

#[no_mangle]
pub extern "C" fn thunder_plugin_abi_version() -> u64 {
    2u64 << 32
}
