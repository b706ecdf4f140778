// sabi_trait expands to impls of foreign traits inside the traits' scope.
#![allow(non_local_definitions)]
//! The plugin's root module and the two FFI-safe objects it hands out: an executor (claim,
//! compile) and a compiled region (run). Dropping either drops the plugin-side value.

use crate::services::{ExecContext, HostServices};
use crate::tensor::TensorDesc;
use crate::version::AbiVersion;
use crate::view::{ArgView, TraceView, ValueMeta};
use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, ROption, RResult, RSlice, RStr, RString, RVec, Tuple2},
    StableAbi,
};

#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginErrorKind {
    /// The plugin cannot do what was asked (an op or dtype it does not support).
    Unsupported = 0,
    /// Bad options or input.
    Invalid = 1,
    /// The plugin panicked; the export macro caught it.
    Panic = 2,
    /// Anything else that went wrong inside the plugin.
    Internal = 3,
}

/// An error crossing the boundary: a code and a message, never a panic.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct PluginError {
    pub kind: PluginErrorKind,
    pub message: RString,
}

impl PluginError {
    pub fn new(kind: PluginErrorKind, message: impl Into<String>) -> Self {
        PluginError {
            kind,
            message: RString::from(message.into()),
        }
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(PluginErrorKind::Unsupported, message)
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(PluginErrorKind::Invalid, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(PluginErrorKind::Internal, message)
    }
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for PluginError {}

/// What a plugin says about itself before it is created.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct PluginInfo {
    pub name: RString,
    /// The plugin's own semver version (checked against `requires` in plugins.toml).
    pub version: RString,
    pub abi_version: AbiVersion,
    pub description: RString,
    /// Device kinds it runs on: "cpu", "cuda".
    pub devices: RVec<RString>,
    /// Symbol ids it can implement (informational; claiming is what counts).
    pub symbols: RVec<RString>,
}

#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub enum OptionValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(RString),
}

/// One `[executor.options]` entry from plugins.toml.
pub type PluginOption = Tuple2<RString, OptionValue>;

/// A claim: op indices into the view that the executor runs as one unit.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct RegionClaim {
    pub ops: RVec<u32>,
}

/// An accepted region, as the host hands it to `compile`: its ops in trace order, the values it
/// reads from outside (the order of `run`'s inputs) and the values it must write (the order of
/// `run`'s outputs).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct RegionSpec {
    pub ops: RVec<u32>,
    pub inputs: RVec<u32>,
    pub outputs: RVec<u32>,
}

#[sabi_trait]
pub trait CompiledRegionObj: Send + Sync {
    /// Runs the region. `outputs` point at host-allocated memory of the declared shapes.
    #[sabi(last_prefix_field)]
    fn run(
        &self,
        inputs: RSlice<'_, TensorDesc<'_>>,
        outputs: RSlice<'_, TensorDesc<'_>>,
        ctx: ExecContext,
    ) -> RResult<(), PluginError>;
}

pub type CompiledBox = CompiledRegionObj_TO<'static, RBox<()>>;

#[sabi_trait]
pub trait ExecutorObj: Send + Sync {
    /// `Ok` when the executor can run here, or the reason it cannot (e.g. "no CUDA driver").
    fn available(&self) -> RResult<(), RString>;

    fn claim(&self, view: &TraceView) -> RResult<RVec<RegionClaim>, PluginError>;

    #[sabi(last_prefix_field)]
    fn compile(&self, view: &TraceView, region: &RegionSpec) -> RResult<CompiledBox, PluginError>;

    /// `compile`, told which of the region's inputs are static (ABI 1.2): positions in
    /// `region.inputs` whose tensor is, on every run of the compiled region, the same buffer
    /// (address, shape and strides) holding the same values, a buffer that outlives the
    /// compiled region (an inference session's weights). An executor may keep work derived
    /// from such an input between runs (a GEMM's packed weight). A plugin built against 1.1
    /// lacks this method, and its `compile` is called instead.
    fn compile_static(
        &self,
        view: &TraceView,
        region: &RegionSpec,
        static_inputs: RSlice<'_, u32>,
    ) -> RResult<CompiledBox, PluginError> {
        let _ = static_inputs;
        self.compile(view, region)
    }
}

pub type ExecutorBox = ExecutorObj_TO<'static, RBox<()>>;

/// A new symbol a plugin adds to the language, e.g. `mylib.fused_rms_norm`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct CustomOpDecl {
    /// Stable id, `namespace.name`; it must not collide with built-in or other plugins' ops.
    pub id: RString,
    pub description: RString,
    /// Optional decomposition as trace text whose parameters are the op's tensor arguments in
    /// order. It is replayed on the actual inputs, so it should be written with shape-agnostic
    /// ltorch ops; the annotated parameter types are an example. Without one, only executors
    /// that claim the op can run it, and it has no gradient.
    pub decomposition: ROption<RString>,
}

/// The root module every plugin exports (through [`crate::export_executor!`]).
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    pub abi_version: AbiVersion,
    pub info: extern "C" fn() -> PluginInfo,
    #[sabi(last_prefix_field)]
    pub create: extern "C" fn(
        host: HostServices,
        options: RVec<PluginOption>,
    ) -> RResult<ExecutorBox, PluginError>,
    /// Ops this plugin declares (ABI 1.1; absent in plugins built against 1.0).
    #[sabi(missing_field(option))]
    pub custom_ops: extern "C" fn() -> RVec<CustomOpDecl>,
    /// Shape and dtype rule of a declared op: output metadata for these arguments, where
    /// `ArgView::Value(i)` refers to `values[i]` (ABI 1.1).
    #[sabi(missing_field(option))]
    pub custom_op_meta: extern "C" fn(
        op: RStr<'_>,
        args: RSlice<'_, ArgView>,
        values: RSlice<'_, ValueMeta>,
    ) -> RResult<RVec<ValueMeta>, PluginError>,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "thunder_plugin";
    const NAME: &'static str = "thunder_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
