//! Kernel packages: a folder holding `kernel.toml` (the manifest), the cubin (and PTX), and
//! Triton's `metadata.json`. Loading validates everything a launch will rely on, so a broken
//! package is reported once, naming the file and the field, and never claimed.
//!
//! The format is documented in `docs/triton-kernels.md`.

pub use crate::binary::{
    cubin_sm, ptx_isa_min_cuda, ptx_param_count, ptx_param_types, ptx_type_fits,
};
use crate::expr::{self, Expr};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thunder_abi::DTypeCode;

pub const MANIFEST: &str = "kernel.toml";

/// Why a package was refused: the file and the field it is about.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {field}: {message}", file.display())]
pub struct PackageError {
    pub file: PathBuf,
    pub field: String,
    pub message: String,
}

fn err(file: &Path, field: impl Into<String>, message: impl Into<String>) -> PackageError {
    PackageError {
        file: file.to_path_buf(),
        field: field.into(),
        message: message.into(),
    }
}

/// `kernel.toml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    symbol: String,
    kernel: String,
    cubin: String,
    #[serde(default)]
    ptx: Option<String>,
    #[serde(default = "default_metadata")]
    metadata: String,
    #[serde(default)]
    ptx_isa: Option<String>,
    #[serde(default)]
    triton_version: Option<String>,
    #[serde(default)]
    description: String,
    args: Vec<String>,
    outputs: Vec<String>,
    signature: Vec<String>,
    #[serde(default)]
    constexprs: BTreeMap<String, toml::Value>,
    params: Vec<String>,
    #[serde(default)]
    constraints: Vec<String>,
    grid: Vec<String>,
    dtypes: BTreeMap<String, String>,
}

fn default_metadata() -> String {
    "metadata.json".into()
}

/// The fields of Triton's metadata that launching depends on. Keys that Triton versions added
/// over time are optional: their absence means the older behaviour (no scratch parameter).
#[derive(Debug, Clone, Deserialize)]
struct RawMetadata {
    name: String,
    num_warps: u32,
    shared: u32,
    target: RawTarget,
    #[serde(default = "one")]
    num_ctas: u32,
    #[serde(default)]
    global_scratch_size: Option<u64>,
    #[serde(default)]
    global_scratch_align: Option<u64>,
    #[serde(default)]
    profile_scratch_size: Option<u64>,
    #[serde(default)]
    profile_scratch_align: Option<u64>,
    #[serde(default)]
    launch_cooperative_grid: bool,
    #[serde(default)]
    launch_pdl: bool,
    #[serde(default)]
    tensordesc_meta: Option<serde_json::Value>,
    #[serde(default)]
    triton_version: Option<String>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
struct RawTarget {
    backend: String,
    arch: serde_json::Value,
    #[serde(default = "warp32")]
    warp_size: u32,
}

fn warp32() -> u32 {
    32
}

/// A kernel parameter type from Triton's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    Ptr(DTypeCode),
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
}

impl ParamType {
    pub fn parse(s: &str) -> Option<ParamType> {
        if let Some(elem) = s.strip_prefix('*') {
            let d = match elem {
                "fp16" => DTypeCode::F16,
                "bf16" => DTypeCode::BF16,
                "fp32" => DTypeCode::F32,
                "fp64" => DTypeCode::F64,
                "i8" => DTypeCode::I8,
                "u8" => DTypeCode::U8,
                "i16" => DTypeCode::I16,
                "i32" => DTypeCode::I32,
                "i64" => DTypeCode::I64,
                "i1" => DTypeCode::Bool,
                _ => return None,
            };
            return Some(ParamType::Ptr(d));
        }
        Some(match s {
            "i32" => ParamType::I32,
            "i64" => ParamType::I64,
            "u32" => ParamType::U32,
            "u64" => ParamType::U64,
            "fp32" => ParamType::F32,
            "fp64" => ParamType::F64,
            _ => return None,
        })
    }
}

/// Which scratch buffers the kernel's trailing parameters point at, as Triton's launcher
/// (`backends/nvidia/driver.py`, `CudaLauncher`) passes them: after the kernel's own arguments
/// come the global scratch pointer, then the profile scratch pointer, each null when its size
/// is 0 and otherwise a buffer of `size * grid_x * grid_y * grid_z * num_ctas` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scratch {
    pub size: u64,
    pub align: u64,
}

/// Triton's metadata, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    pub name: String,
    pub num_warps: u32,
    pub num_ctas: u32,
    pub shared: u32,
    /// Compute capability as major*10+minor (`target.arch`, 90 for sm_90).
    pub arch: u32,
    /// `None` when the Triton that built it had no such parameter (the PTX has one fewer).
    pub global_scratch: Option<Scratch>,
    pub profile_scratch: Option<Scratch>,
    pub triton_version: Option<String>,
}

impl Metadata {
    /// Threads per block: Triton's launcher uses `32 * num_warps`.
    pub fn block(&self) -> u32 {
        32 * self.num_warps
    }

    /// How many pointer parameters Triton appends after the kernel's own arguments.
    pub fn trailing_params(&self) -> usize {
        usize::from(self.global_scratch.is_some()) + usize::from(self.profile_scratch.is_some())
    }
}

/// A validated package.
#[derive(Debug, Clone)]
pub struct Package {
    pub dir: PathBuf,
    pub symbol: String,
    pub kernel: String,
    pub cubin: PathBuf,
    pub ptx: Option<PathBuf>,
    pub ptx_isa: Option<(u32, u32)>,
    pub description: String,
    pub args: Vec<String>,
    pub outputs: Vec<String>,
    pub signature: Vec<ParamType>,
    pub params: Vec<Expr>,
    pub param_text: Vec<String>,
    pub constraints: Vec<Expr>,
    pub constraint_text: Vec<String>,
    pub grid: [Expr; 3],
    pub dtypes: BTreeMap<String, DTypeCode>,
    pub meta: Metadata,
}

impl Package {
    /// The folder's name, used in logs (`sdpa_fwd_bf16_d64`).
    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.dir.display().to_string())
    }

    /// The oldest CUDA driver (major, minor) that can JIT the PTX; cubins load on any driver
    /// of the same major version (CUDA's minor-version compatibility).
    pub fn min_cuda(&self) -> Option<(u32, u32)> {
        self.ptx_isa.map(ptx_isa_min_cuda)
    }
}

/// Reads the manifest of one package folder and everything it names.
pub fn load(dir: &Path) -> Result<Package, PackageError> {
    let mpath = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&mpath)
        .map_err(|e| err(&mpath, "(file)", format!("cannot read: {e}")))?;
    let raw: RawManifest = toml::from_str(&text).map_err(|e| toml_error(&mpath, &e))?;
    let m = &mpath;

    if !raw.symbol.contains('.') {
        return Err(err(
            m,
            "symbol",
            format!(
                "`{}` is not a symbol id such as `ltorch.rms_norm`",
                raw.symbol
            ),
        ));
    }
    let mut names: Vec<&str> = Vec::new();
    for (field, list) in [("args", &raw.args), ("outputs", &raw.outputs)] {
        for (i, n) in list.iter().enumerate() {
            let ok = n.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !matches!(n.as_str(), "none" | "true" | "false")
                && !expr::FUNCTIONS.contains(&n.as_str());
            if !ok {
                return Err(err(
                    m,
                    format!("{field}[{i}]"),
                    format!("`{n}` is not a usable name"),
                ));
            }
            if names.contains(&n.as_str()) {
                return Err(err(
                    m,
                    format!("{field}[{i}]"),
                    format!("`{n}` is named twice"),
                ));
            }
            names.push(n);
        }
    }
    if raw.outputs.len() != 1 {
        return Err(err(
            m,
            "outputs",
            format!("exactly one output is supported, got {}", raw.outputs.len()),
        ));
    }

    let mut dtypes = BTreeMap::new();
    for (name, d) in &raw.dtypes {
        if !names.contains(&name.as_str()) {
            return Err(err(
                m,
                format!("dtypes.{name}"),
                "not one of `args` or `outputs`",
            ));
        }
        let code = DTypeCode::from_short_name(d).ok_or_else(|| {
            err(
                m,
                format!("dtypes.{name}"),
                format!("unknown dtype `{d}` (use f16, bf16, f32, ...)"),
            )
        })?;
        dtypes.insert(name.clone(), code);
    }
    let out = &raw.outputs[0];
    if !dtypes.contains_key(out) {
        return Err(err(
            m,
            format!("dtypes.{out}"),
            "the output's dtype must be given",
        ));
    }

    let parse_list = |field: &str, list: &[String]| -> Result<Vec<Expr>, PackageError> {
        list.iter()
            .enumerate()
            .map(|(i, s)| {
                let e = expr::parse(s)
                    .map_err(|e| err(m, format!("{field}[{i}]"), format!("`{s}`: {e}")))?;
                let mut refs = Vec::new();
                e.names(&mut refs);
                if let Some(bad) = refs.iter().find(|r| !names.contains(&r.as_str())) {
                    return Err(err(
                        m,
                        format!("{field}[{i}]"),
                        format!("`{s}`: `{bad}` is not one of `args` or `outputs`"),
                    ));
                }
                Ok(e)
            })
            .collect()
    };

    let signature = raw
        .signature
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if s == "constexpr" {
                return Err(err(
                    m,
                    format!("signature[{i}]"),
                    "constexprs are baked into the cubin and are not parameters: list them under `constexprs`",
                ));
            }
            ParamType::parse(s).ok_or_else(|| {
                err(
                    m,
                    format!("signature[{i}]"),
                    format!("unsupported type `{s}` (pointers *fp16, *bf16, *fp32, ...; scalars i32, i64, u32, u64, fp32, fp64)"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let params = parse_list("params", &raw.params)?;
    if params.len() != signature.len() {
        return Err(err(
            m,
            "params",
            format!(
                "{} expressions for a signature of {} parameters",
                params.len(),
                signature.len()
            ),
        ));
    }
    for (i, (p, ty)) in params.iter().zip(&signature).enumerate() {
        let field = format!("params[{i}]");
        match (ty, p) {
            (ParamType::Ptr(elem), Expr::Name(n)) => match dtypes.get(n) {
                Some(d) if d == elem => {}
                Some(d) => {
                    return Err(err(
                        m,
                        field,
                        format!(
                            "`{n}` is {} but signature[{i}] points at {}",
                            d.short_name(),
                            elem.short_name()
                        ),
                    ))
                }
                None => {
                    return Err(err(
                        m,
                        field,
                        format!("pointer argument `{n}` needs an entry in `dtypes`"),
                    ))
                }
            },
            (ParamType::Ptr(_), _) => {
                return Err(err(
                    m,
                    field,
                    format!(
                    "signature[{i}] is a pointer: the expression must be a tensor's name, got `{}`",
                    raw.params[i]
                ),
                ))
            }
            (_, Expr::Name(n)) if dtypes.contains_key(n) => {
                return Err(err(
                    m,
                    field,
                    format!("`{n}` is a tensor but signature[{i}] is a scalar"),
                ))
            }
            _ => {}
        }
    }
    // Every tensor the kernel reads or writes through a pointer has a declared dtype; the
    // output must be among them, or the kernel would never write it.
    if !params
        .iter()
        .any(|p| matches!(p, Expr::Name(n) if n == out))
    {
        return Err(err(
            m,
            "params",
            format!("the output `{out}` is not passed to the kernel"),
        ));
    }
    let constraints = parse_list("constraints", &raw.constraints)?;
    let grid_list = parse_list("grid", &raw.grid)?;
    let grid: [Expr; 3] = match <[Expr; 3]>::try_from(grid_list) {
        Ok(g) => g,
        Err(v) => {
            return Err(err(
                m,
                "grid",
                format!("needs 3 expressions (x, y, z), got {}", v.len()),
            ))
        }
    };
    for (k, v) in &raw.constexprs {
        if !matches!(
            v,
            toml::Value::Integer(_) | toml::Value::Boolean(_) | toml::Value::Float(_)
        ) {
            return Err(err(
                m,
                format!("constexprs.{k}"),
                "must be an integer, float or bool (informational: already baked in)",
            ));
        }
    }

    let ptx_isa = match &raw.ptx_isa {
        None => None,
        Some(s) => Some(parse_version(s).ok_or_else(|| {
            err(
                m,
                "ptx_isa",
                format!("`{s}` is not a version such as `8.8`"),
            )
        })?),
    };

    let file_in = |field: &str, name: &str| -> Result<PathBuf, PackageError> {
        let p = dir.join(name);
        if name.contains("..") || Path::new(name).is_absolute() {
            return Err(err(
                m,
                field,
                format!("`{name}` must be a file inside the package folder"),
            ));
        }
        if !p.is_file() {
            return Err(err(m, field, format!("`{}` does not exist", p.display())));
        }
        Ok(p)
    };
    let cubin = file_in("cubin", &raw.cubin)?;
    let ptx = raw.ptx.as_deref().map(|p| file_in("ptx", p)).transpose()?;
    let mdpath = file_in("metadata", &raw.metadata)?;
    let meta = load_metadata(&mdpath)?;
    if meta.name != raw.kernel {
        return Err(err(
            &mdpath,
            "name",
            format!(
                "the kernel is `{}` but {MANIFEST} says `kernel = \"{}\"`",
                meta.name, raw.kernel
            ),
        ));
    }
    if let (Some(a), Some(b)) = (&raw.triton_version, &meta.triton_version) {
        if a != b {
            return Err(err(
                m,
                "triton_version",
                format!("`{a}` but metadata.json says `{b}`"),
            ));
        }
    }
    let cubin_bytes =
        std::fs::read(&cubin).map_err(|e| err(m, "cubin", format!("cannot read: {e}")))?;
    if !cubin_bytes.starts_with(b"\x7fELF") {
        return Err(err(
            m,
            "cubin",
            format!("`{}` is not an ELF cubin", cubin.display()),
        ));
    }
    if let Some(sm) = cubin_sm(&cubin_bytes) {
        if sm != meta.arch {
            return Err(err(
                m,
                "cubin",
                format!(
                    "`{}` holds sm_{sm} code but metadata.json's target.arch is {}",
                    cubin.display(),
                    meta.arch
                ),
            ));
        }
    }
    if let Some(ptx_path) = &ptx {
        let text = std::fs::read_to_string(ptx_path)
            .map_err(|e| err(m, "ptx", format!("cannot read: {e}")))?;
        let types = ptx_param_types(&text, &raw.kernel).ok_or_else(|| {
            err(
                ptx_path,
                "(entry)",
                format!("no `.entry {}` in the PTX", raw.kernel),
            )
        })?;
        let found = types.len();
        let want = signature.len() + meta.trailing_params();
        if found != want {
            return Err(err(
                ptx_path,
                "(entry)",
                format!(
                    "`{}` takes {found} parameters, but the signature has {} and the metadata adds {} scratch pointer(s): {want}",
                    raw.kernel,
                    signature.len(),
                    meta.trailing_params()
                ),
            ));
        }
        // The scratch pointers are 64-bit like any pointer.
        let expected = signature
            .iter()
            .copied()
            .chain(std::iter::repeat_n(ParamType::U64, meta.trailing_params()));
        for (i, (ty, got)) in expected.zip(&types).enumerate() {
            if !ptx_type_fits(ty, got) {
                return Err(err(
                    ptx_path,
                    "(entry)",
                    format!(
                        "parameter {i} of `{}` is .{got}, which cannot carry {}",
                        raw.kernel,
                        raw.signature
                            .get(i)
                            .map_or("a scratch pointer", String::as_str)
                    ),
                ));
            }
        }
    }

    Ok(Package {
        dir: dir.to_path_buf(),
        symbol: raw.symbol,
        kernel: raw.kernel,
        cubin,
        ptx,
        ptx_isa,
        description: raw.description,
        args: raw.args,
        outputs: raw.outputs,
        signature,
        params,
        param_text: raw.params,
        constraints,
        constraint_text: raw.constraints,
        grid,
        dtypes,
        meta,
    })
}

fn parse_version(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// TOML errors name the key when serde knows it (missing or unknown field, wrong type).
fn toml_error(file: &Path, e: &toml::de::Error) -> PackageError {
    let msg = e.message().to_string();
    let field = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|p| msg.split_once(p).and_then(|(_, rest)| rest.split_once('`')))
        .map(|(f, _)| f.to_string())
        .or_else(|| {
            e.span().map(|s| {
                // The key on the line where the error is.
                let text = std::fs::read_to_string(file).unwrap_or_default();
                let line_start = text[..s.start.min(text.len())]
                    .rfind('\n')
                    .map_or(0, |i| i + 1);
                text[line_start..]
                    .split('=')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string()
            })
        })
        .unwrap_or_else(|| "(toml)".into());
    err(file, field, msg.trim())
}

fn load_metadata(path: &Path) -> Result<Metadata, PackageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(path, "(file)", format!("cannot read: {e}")))?;
    let raw: RawMetadata = serde_json::from_str(&text).map_err(|e| {
        let msg = e.to_string();
        let field = msg
            .split_once("field `")
            .and_then(|(_, r)| r.split_once('`'))
            .map_or("(json)".to_string(), |(f, _)| f.to_string());
        err(path, field, msg)
    })?;
    if raw.target.backend != "cuda" {
        return Err(err(
            path,
            "target.backend",
            format!("`{}`: only cuda kernels are supported", raw.target.backend),
        ));
    }
    let arch = match &raw.target.arch {
        serde_json::Value::Number(n) => n.as_u64().and_then(|a| u32::try_from(a).ok()),
        // Older Triton wrote e.g. "sm90"; accept either.
        serde_json::Value::String(s) => s
            .trim_start_matches("sm_")
            .trim_start_matches("sm")
            .trim_end_matches('a')
            .parse()
            .ok(),
        _ => None,
    }
    .ok_or_else(|| {
        err(
            path,
            "target.arch",
            format!(
                "`{}` is not a compute capability such as 90",
                raw.target.arch
            ),
        )
    })?;
    if raw.target.warp_size != 32 {
        return Err(err(path, "target.warp_size", "must be 32"));
    }
    if raw.num_warps == 0 || raw.num_warps > 32 {
        return Err(err(
            path,
            "num_warps",
            format!("{} (1 to 32 warps: at most 1024 threads)", raw.num_warps),
        ));
    }
    // Cluster launches, cooperative grids, programmatic dependent launch and TMA descriptors
    // all need cuLaunchKernelEx attributes or host-built descriptors that this launcher does
    // not implement; refuse the package rather than launch it wrongly.
    if raw.num_ctas != 1 {
        return Err(err(
            path,
            "num_ctas",
            format!(
                "{}: cluster launches are not supported (compile with num_ctas=1)",
                raw.num_ctas
            ),
        ));
    }
    if raw.launch_cooperative_grid {
        return Err(err(
            path,
            "launch_cooperative_grid",
            "cooperative launches are not supported",
        ));
    }
    if raw.launch_pdl {
        return Err(err(
            path,
            "launch_pdl",
            "programmatic dependent launch is not supported",
        ));
    }
    if raw.tensordesc_meta.as_ref().is_some_and(|t| {
        !matches!(t, serde_json::Value::Null) && t.as_array().is_none_or(|a| !a.is_empty())
    }) {
        return Err(err(
            path,
            "tensordesc_meta",
            "TMA tensor descriptors are not supported",
        ));
    }
    let scratch = |size: Option<u64>,
                   align: Option<u64>,
                   field: &str|
     -> Result<Option<Scratch>, PackageError> {
        match size {
            None => Ok(None),
            Some(size) => {
                let align = align.unwrap_or(1).max(1);
                if !align.is_power_of_two() {
                    return Err(err(
                        path,
                        format!("{field}_align"),
                        format!("{align} is not a power of two"),
                    ));
                }
                Ok(Some(Scratch { size, align }))
            }
        }
    };
    Ok(Metadata {
        name: raw.name,
        num_warps: raw.num_warps,
        num_ctas: raw.num_ctas,
        shared: raw.shared,
        arch,
        global_scratch: scratch(
            raw.global_scratch_size,
            raw.global_scratch_align,
            "global_scratch",
        )?,
        profile_scratch: scratch(
            raw.profile_scratch_size,
            raw.profile_scratch_align,
            "profile_scratch",
        )?,
        triton_version: raw.triton_version,
    })
}

/// Loads every package under `root`: `root` itself when it holds a manifest, otherwise each
/// subfolder that does. Broken packages are returned as errors beside the good ones.
pub fn load_dir(root: &Path) -> (Vec<Package>, Vec<PackageError>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    if root.join(MANIFEST).is_file() {
        match load(root) {
            Ok(p) => good.push(p),
            Err(e) => bad.push(e),
        }
        return (good, bad);
    }
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) => {
            bad.push(err(root, "(folder)", format!("cannot read: {e}")));
            return (good, bad);
        }
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(MANIFEST).is_file())
        .collect();
    // Sorted, so that the first matching package is the same on every machine.
    dirs.sort();
    for d in dirs {
        match load(&d) {
            Ok(p) => good.push(p),
            Err(e) => bad.push(e),
        }
    }
    (good, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_isa_maps_to_the_cuda_release_that_introduced_it() {
        assert_eq!(ptx_isa_min_cuda((8, 0)), (12, 0));
        assert_eq!(ptx_isa_min_cuda((8, 5)), (12, 5));
        // CUDA 12.6 skipped an ISA: 8.6 is 12.7, 8.8 is 12.9 (Triton's ptx_get_version inverse).
        assert_eq!(ptx_isa_min_cuda((8, 6)), (12, 7));
        assert_eq!(ptx_isa_min_cuda((8, 8)), (12, 9));
        assert_eq!(ptx_isa_min_cuda((9, 0)), (13, 0));
        assert_eq!(ptx_isa_min_cuda((7, 8)), (11, 8));
    }

    #[test]
    fn ptx_params_are_counted_for_the_named_entry_only() {
        let ptx = ".visible .entry k(\n .param .u64 k_param_0,\n .param .u32 k_param_1\n)\n{ ld.param.b32 %r1, [k_param_1]; }\n.visible .entry other(\n .param .u64 p\n)";
        assert_eq!(ptx_param_count(ptx, "k"), Some(2));
        assert_eq!(ptx_param_count(ptx, "other"), Some(1));
        assert_eq!(ptx_param_count(ptx, "missing"), None);
    }
}
