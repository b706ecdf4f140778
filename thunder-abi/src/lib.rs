//! The stable ABI between the thunder host and executor plugins.
//!
//! Everything that crosses a `.so` boundary is defined here, with `abi_stable` layouts that the
//! host checks when it loads a plugin. Plugins depend on this crate alone; the host never names
//! an executor. Symbols cross as stable string ids (`prims.add`), never as enum numbers.
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod claim;
pub mod export;
pub mod plugin;
pub mod prims;
pub mod services;
pub mod strides;
pub mod tensor;
pub mod version;
pub mod view;

pub use abi_stable;
pub use plugin::{
    CompiledBox, CompiledRegionObj, CompiledRegionObj_TO, ExecutorBox, ExecutorObj, ExecutorObj_TO,
    OptionValue, PluginError, PluginErrorKind, PluginInfo, PluginModule, PluginModuleRef,
    PluginOption, RegionClaim, RegionSpec,
};
pub use services::{ExecContext, HostServices, LogLevel};
pub use tensor::{DTypeCode, DeviceDesc, DeviceKind, TensorDesc};
pub use version::{AbiVersion, ABI_VERSION, ENTRY_SYMBOL};
pub use view::{ArgView, OpView, TraceView, ValueMeta};
