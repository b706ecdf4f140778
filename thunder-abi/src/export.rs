//! The plugin side: a plain Rust trait to implement and a macro that exports it.
//!
//! The macro wraps every call in `catch_unwind`, so a panicking plugin returns
//! [`PluginErrorKind::Panic`] to the host instead of aborting the process.

use crate::plugin::{
    CompiledBox, CompiledRegionObj, CompiledRegionObj_TO, ExecutorObj, PluginError,
    PluginErrorKind, RegionClaim, RegionSpec,
};
use crate::services::{ExecContext, HostServices, LogLevel};
use crate::tensor::TensorDesc;
use crate::view::TraceView;
use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RResult, RSlice, RStr, RString, RVec},
};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a plugin author implements.
pub trait Executor: Send + Sync + 'static {
    fn available(&self) -> Result<(), String> {
        Ok(())
    }
    /// Regions to claim, each a list of op indices. Unclaimed composites are decomposed and the
    /// executor is asked again; claim only what `compile` will accept.
    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError>;
    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError>;
}

pub trait CompiledRegion: Send + Sync + 'static {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError>;
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Runs `f`, turning a panic into a [`PluginError`] of kind `Panic`.
pub fn guard<T>(what: &str, f: impl FnOnce() -> Result<T, PluginError>) -> RResult<T, PluginError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => RResult::ROk(v),
        Ok(Err(e)) => RResult::RErr(e),
        Err(payload) => RResult::RErr(PluginError::new(
            PluginErrorKind::Panic,
            format!("panicked in {what}: {}", panic_message(payload)),
        )),
    }
}

/// Adapts an [`Executor`] to the FFI object; the export macro uses it.
pub struct ExecutorAdapter<E: Executor>(pub E);

struct CompiledAdapter(Box<dyn CompiledRegion>);

impl CompiledRegionObj for CompiledAdapter {
    fn run(
        &self,
        inputs: RSlice<'_, TensorDesc<'_>>,
        outputs: RSlice<'_, TensorDesc<'_>>,
        ctx: ExecContext,
    ) -> RResult<(), PluginError> {
        guard("run", || {
            self.0.run(inputs.as_slice(), outputs.as_slice(), &ctx)
        })
    }
}

impl<E: Executor> ExecutorObj for ExecutorAdapter<E> {
    fn available(&self) -> RResult<(), RString> {
        match catch_unwind(AssertUnwindSafe(|| self.0.available())) {
            Ok(Ok(())) => RResult::ROk(()),
            Ok(Err(reason)) => RResult::RErr(reason.into()),
            Err(payload) => {
                RResult::RErr(format!("panicked in available: {}", panic_message(payload)).into())
            }
        }
    }

    fn claim(&self, view: &TraceView) -> RResult<RVec<RegionClaim>, PluginError> {
        guard("claim", || {
            let regions = self.0.claim(view)?;
            Ok(regions
                .into_iter()
                .map(|ops| RegionClaim { ops: ops.into() })
                .collect())
        })
    }

    fn compile(&self, view: &TraceView, region: &RegionSpec) -> RResult<CompiledBox, PluginError> {
        guard("compile", || {
            let compiled = self.0.compile(view, region)?;
            Ok(CompiledRegionObj_TO::from_value(
                CompiledAdapter(compiled),
                TD_Opaque,
            ))
        })
    }
}

/// Logging through the host, for plugins.
#[derive(Clone, Copy)]
pub struct HostLogger {
    pub services: HostServices,
    pub plugin: &'static str,
}

impl HostLogger {
    pub fn log(&self, level: LogLevel, message: &str) {
        (self.services.log)(level, RStr::from(self.plugin), RStr::from(message));
    }
}

/// Exports an executor plugin.
///
/// ```ignore
/// thunder_abi::export_executor! {
///     info: my_info,            // fn() -> thunder_abi::PluginInfo
///     create: MyExecutor::new,  // fn(HostServices, &[(String, OptionValue)]) -> Result<MyExecutor, PluginError>
/// }
/// ```
#[macro_export]
macro_rules! export_executor {
    (info: $info:path, create: $create:path $(,)?) => {
        #[no_mangle]
        pub extern "C" fn thunder_plugin_abi_version() -> u64 {
            $crate::version::ABI_VERSION.pack()
        }

        extern "C" fn __thunder_plugin_info() -> $crate::plugin::PluginInfo {
            // A panic here would abort inside an extern "C" fn; catch it and report a stub
            // whose name says what happened, so the host can refuse the plugin.
            match ::std::panic::catch_unwind(|| $info()) {
                Ok(info) => info,
                Err(_) => $crate::plugin::PluginInfo {
                    name: "<panicked in info>".into(),
                    version: "0.0.0".into(),
                    abi_version: $crate::version::ABI_VERSION,
                    description: "the plugin's info function panicked".into(),
                    devices: Default::default(),
                    symbols: Default::default(),
                },
            }
        }

        extern "C" fn __thunder_plugin_create(
            host: $crate::services::HostServices,
            options: $crate::abi_stable::std_types::RVec<$crate::plugin::PluginOption>,
        ) -> $crate::abi_stable::std_types::RResult<
            $crate::plugin::ExecutorBox,
            $crate::plugin::PluginError,
        > {
            let options: Vec<(String, $crate::plugin::OptionValue)> = options
                .into_iter()
                .map(|t| (t.0.into_string(), t.1))
                .collect();
            $crate::export::guard("create", || {
                let executor = $create(host, &options)?;
                Ok($crate::plugin::ExecutorObj_TO::from_value(
                    $crate::export::ExecutorAdapter(executor),
                    $crate::abi_stable::sabi_trait::TD_Opaque,
                ))
            })
        }

        #[$crate::abi_stable::export_root_module]
        pub fn __thunder_plugin_root_module() -> $crate::plugin::PluginModuleRef {
            use $crate::abi_stable::prefix_type::PrefixTypeTrait;
            $crate::plugin::PluginModule {
                abi_version: $crate::version::ABI_VERSION,
                info: __thunder_plugin_info,
                create: __thunder_plugin_create,
            }
            .leak_into_prefix()
        }
    };
}

/// Reads an option by key, checking its type; the error names the field and both types.
pub fn option_int(
    options: &[(String, crate::plugin::OptionValue)],
    key: &str,
) -> Result<Option<i64>, PluginError> {
    match options.iter().find(|(k, _)| k == key) {
        None => Ok(None),
        Some((_, crate::plugin::OptionValue::Int(v))) => Ok(Some(*v)),
        Some((_, other)) => Err(PluginError::invalid(format!(
            "option `{key}`: expected an integer, got {other:?}"
        ))),
    }
}
