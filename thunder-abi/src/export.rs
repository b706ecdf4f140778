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
    /// `compile` with the positions in `region.inputs` of the static inputs (see
    /// [`crate::plugin::ExecutorObj::compile_static`] for what the host promises about them).
    /// Executors with no use for the promise keep this default.
    fn compile_static(
        &self,
        view: &TraceView,
        region: &RegionSpec,
        static_inputs: &[u32],
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        let _ = static_inputs;
        self.compile(view, region)
    }
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

/// Runs `f`, turning a panic into an error string `"{what}: {message}"`. For plugins that call
/// libraries whose loaders panic when a library or symbol is missing (cudarc's dynamic
/// loading), so "no CUDA here" becomes a reason instead of an unwinding plugin.
pub fn catch_panic<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(format!("{what}: {}", panic_message(payload))),
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
        guard("compile", || Ok(boxed(self.0.compile(view, region)?)))
    }

    fn compile_static(
        &self,
        view: &TraceView,
        region: &RegionSpec,
        static_inputs: RSlice<'_, u32>,
    ) -> RResult<CompiledBox, PluginError> {
        guard("compile", || {
            Ok(boxed(self.0.compile_static(
                view,
                region,
                static_inputs.as_slice(),
            )?))
        })
    }
}

fn boxed(compiled: Box<dyn CompiledRegion>) -> CompiledBox {
    CompiledRegionObj_TO::from_value(CompiledAdapter(compiled), TD_Opaque)
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

/// Shape and dtype rule of a plugin's op: `ArgView::Value(i)` in the arguments refers to the
/// `i`th value metadata; returns the outputs' metadata.
pub type CustomOpMeta = fn(
    &[crate::view::ArgView],
    &[crate::view::ValueMeta],
) -> Result<Vec<crate::view::ValueMeta>, PluginError>;

/// An op a plugin adds to the language (see [`crate::plugin::CustomOpDecl`]).
pub struct CustomOp {
    pub id: String,
    pub description: String,
    /// Shape and dtype rule: `ArgView::Value(i)` in `args` refers to `values[i]`.
    pub meta: CustomOpMeta,
    /// Trace text replayed on the op's tensor arguments when no executor claims the op.
    pub decomposition: Option<String>,
}

/// For plugins that declare no ops.
pub fn no_custom_ops() -> Vec<CustomOp> {
    Vec::new()
}

/// The declarations the export macro hands to the host.
pub fn custom_op_decls(ops: fn() -> Vec<CustomOp>) -> RVec<crate::plugin::CustomOpDecl> {
    match catch_unwind(ops) {
        Ok(ops) => ops
            .into_iter()
            .map(|op| crate::plugin::CustomOpDecl {
                id: op.id.into(),
                description: op.description.into(),
                decomposition: op.decomposition.map(RString::from).into(),
            })
            .collect(),
        // A panicking declaration list declares nothing; the host then sees no such ops.
        Err(_) => RVec::new(),
    }
}

/// Runs the meta of op `id`, catching panics.
pub fn custom_op_meta(
    ops: fn() -> Vec<CustomOp>,
    id: RStr<'_>,
    args: RSlice<'_, crate::view::ArgView>,
    values: RSlice<'_, crate::view::ValueMeta>,
) -> RResult<RVec<crate::view::ValueMeta>, PluginError> {
    guard("custom op meta", || {
        let op = ops()
            .into_iter()
            .find(|op| op.id == id.as_str())
            .ok_or_else(|| {
                PluginError::unsupported(format!("this plugin declares no op `{id}`"))
            })?;
        (op.meta)(args.as_slice(), values.as_slice()).map(RVec::from)
    })
}

/// Exports an executor plugin.
///
/// ```ignore
/// thunder_abi::export_executor! {
///     info: my_info,            // fn() -> thunder_abi::PluginInfo
///     create: MyExecutor::new,  // fn(HostServices, &[(String, OptionValue)]) -> Result<MyExecutor, PluginError>
///     custom_ops: my_ops,       // optional: fn() -> Vec<thunder_abi::export::CustomOp>
/// }
/// ```
#[macro_export]
macro_rules! export_executor {
    (info: $info:path, create: $create:path $(,)?) => {
        $crate::export_executor!(info: $info, create: $create, custom_ops: $crate::export::no_custom_ops);
    };
    (info: $info:path, create: $create:path, custom_ops: $ops:path $(,)?) => {
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

        extern "C" fn __thunder_plugin_custom_ops() -> $crate::abi_stable::std_types::RVec<$crate::plugin::CustomOpDecl> {
            $crate::export::custom_op_decls($ops)
        }

        extern "C" fn __thunder_plugin_custom_op_meta(
            op: $crate::abi_stable::std_types::RStr<'_>,
            args: $crate::abi_stable::std_types::RSlice<'_, $crate::view::ArgView>,
            values: $crate::abi_stable::std_types::RSlice<'_, $crate::view::ValueMeta>,
        ) -> $crate::abi_stable::std_types::RResult<
            $crate::abi_stable::std_types::RVec<$crate::view::ValueMeta>,
            $crate::plugin::PluginError,
        > {
            $crate::export::custom_op_meta($ops, op, args, values)
        }

        #[$crate::abi_stable::export_root_module]
        pub fn __thunder_plugin_root_module() -> $crate::plugin::PluginModuleRef {
            use $crate::abi_stable::prefix_type::PrefixTypeTrait;
            $crate::plugin::PluginModule {
                abi_version: $crate::version::ABI_VERSION,
                info: __thunder_plugin_info,
                create: __thunder_plugin_create,
                custom_ops: __thunder_plugin_custom_ops,
                custom_op_meta: __thunder_plugin_custom_op_meta,
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

/// Reads a boolean option by key, checking its type.
pub fn option_bool(
    options: &[(String, crate::plugin::OptionValue)],
    key: &str,
) -> Result<Option<bool>, PluginError> {
    match options.iter().find(|(k, _)| k == key) {
        None => Ok(None),
        Some((_, crate::plugin::OptionValue::Bool(v))) => Ok(Some(*v)),
        Some((_, other)) => Err(PluginError::invalid(format!(
            "option `{key}`: expected true or false, got {other:?}"
        ))),
    }
}
