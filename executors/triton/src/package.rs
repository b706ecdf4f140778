//! Kernel packages: a folder holding `kernel.toml` (the manifest), the cubins (and PTX), and
//! Triton's metadata. Loading validates everything a launch will rely on, so a broken package is
//! reported once, naming the file and the field, and never claimed.
//!
//! A package implements one symbol with one kernel launch (the manifest's flat form) or several
//! (`[[launch]]` tables, run in order on the same stream), which may share scratch buffers
//! (`[scratch]`) allocated for each run. The format is documented in `docs/triton-kernels.md`.

pub use crate::binary::{
    cubin_sm, ptx_isa_min_cuda, ptx_param_count, ptx_param_types, ptx_type_fits,
};
use crate::expr::{self, Expr};
pub use crate::kernel::Kernel;
use crate::kernel::{load_kernel, RawLaunch, Scope};
pub use crate::metadata::{Metadata, Scratch};
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

pub(crate) fn err(
    file: &Path,
    field: impl Into<String>,
    message: impl Into<String>,
) -> PackageError {
    PackageError {
        file: file.to_path_buf(),
        field: field.into(),
        message: message.into(),
    }
}

/// `kernel.toml` as written. The launch keys (`kernel` to `grid`) are the flat form of a
/// single launch; a manifest gives either them or `[[launch]]` tables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    symbol: String,
    #[serde(default)]
    kernel: Option<String>,
    #[serde(default)]
    cubin: Option<String>,
    #[serde(default)]
    ptx: Option<String>,
    #[serde(default)]
    metadata: Option<String>,
    #[serde(default)]
    ptx_isa: Option<String>,
    #[serde(default)]
    triton_version: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    pointer_align: Option<u64>,
    args: Vec<String>,
    outputs: Vec<String>,
    #[serde(default)]
    signature: Option<Vec<String>>,
    #[serde(default)]
    constexprs: Option<BTreeMap<String, toml::Value>>,
    #[serde(default)]
    params: Option<Vec<String>>,
    #[serde(default)]
    constraints: Vec<String>,
    #[serde(default)]
    grid: Option<Vec<String>>,
    dtypes: BTreeMap<String, String>,
    #[serde(default)]
    scratch: BTreeMap<String, RawScratch>,
    #[serde(default)]
    launch: Vec<RawLaunch>,
}

/// A `[scratch]` entry: `delta = { dtype = "f32", numel = "q.shape[0] * q.shape[2]" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScratch {
    dtype: String,
    numel: String,
}

impl RawManifest {
    /// The launches, from `[[launch]]` tables or from the flat keys, with the field prefix their
    /// errors use. Mixing the two forms is an error naming the stray key.
    fn launches(&mut self, m: &Path) -> Result<Vec<(String, RawLaunch)>, PackageError> {
        let flat = [
            ("kernel", self.kernel.is_some()),
            ("cubin", self.cubin.is_some()),
            ("ptx", self.ptx.is_some()),
            ("metadata", self.metadata.is_some()),
            ("signature", self.signature.is_some()),
            ("constexprs", self.constexprs.is_some()),
            ("params", self.params.is_some()),
            ("grid", self.grid.is_some()),
        ];
        if !self.launch.is_empty() {
            if let Some((key, _)) = flat.iter().find(|(_, given)| *given) {
                return Err(err(
                    m,
                    *key,
                    "given beside [[launch]] tables: a manifest describes its launches either with top-level keys (one launch) or with [[launch]] tables",
                ));
            }
            return Ok(std::mem::take(&mut self.launch)
                .into_iter()
                .enumerate()
                .map(|(i, l)| (format!("launch[{i}]."), l))
                .collect());
        }
        // The flat form: the same keys a [[launch]] table requires, missing ones named as serde
        // would name them.
        let missing = |k: &str| err(m, k, format!("missing field `{k}`"));
        Ok(vec![(
            String::new(),
            RawLaunch {
                kernel: self.kernel.take().ok_or_else(|| missing("kernel"))?,
                cubin: self.cubin.take().ok_or_else(|| missing("cubin"))?,
                ptx: self.ptx.take(),
                metadata: self
                    .metadata
                    .take()
                    .unwrap_or_else(crate::kernel::default_metadata),
                signature: self.signature.take().ok_or_else(|| missing("signature"))?,
                constexprs: self.constexprs.take().unwrap_or_default(),
                params: self.params.take().ok_or_else(|| missing("params"))?,
                grid: self.grid.take().ok_or_else(|| missing("grid"))?,
            },
        )])
    }
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

/// A buffer the package's launches share, allocated from the host's pool for each run and
/// returned when the launches are queued (uninitialized: a launch must write it before another
/// reads it).
#[derive(Debug, Clone)]
pub struct ScratchBuffer {
    pub name: String,
    pub dtype: DTypeCode,
    pub numel: Expr,
    pub numel_text: String,
}

/// A validated package.
#[derive(Debug, Clone)]
pub struct Package {
    pub dir: PathBuf,
    pub symbol: String,
    pub ptx_isa: Option<(u32, u32)>,
    pub description: String,
    /// Every tensor's address must be a multiple of this (the cubins were compiled assuming
    /// it); 1 when the manifest does not say.
    pub pointer_align: u64,
    pub args: Vec<String>,
    pub outputs: Vec<String>,
    pub constraints: Vec<Expr>,
    pub constraint_text: Vec<String>,
    /// The op's tensors' dtypes, then the scratch buffers'.
    pub dtypes: BTreeMap<String, DTypeCode>,
    pub scratch: Vec<ScratchBuffer>,
    /// Run in this order on one stream.
    pub launches: Vec<Kernel>,
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

    /// The compute capability the cubins were built for (the same for every launch: checked
    /// at load).
    pub fn arch(&self) -> u32 {
        self.launches.first().map_or(0, |k| k.meta.arch)
    }
}

fn usable_name(n: &str) -> bool {
    n.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(n, "none" | "true" | "false")
        && !expr::FUNCTIONS.contains(&n)
}

/// Reads the manifest of one package folder and everything it names.
pub fn load(dir: &Path) -> Result<Package, PackageError> {
    let mpath = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&mpath)
        .map_err(|e| err(&mpath, "(file)", format!("cannot read: {e}")))?;
    let mut raw: RawManifest = toml::from_str(&text).map_err(|e| toml_error(&mpath, &e))?;
    let m = &mpath;
    let launches = raw.launches(m)?;

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
            if !usable_name(n) {
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
    if raw.outputs.is_empty() {
        return Err(err(m, "outputs", "at least one output must be named"));
    }
    let pointer_align = raw.pointer_align.unwrap_or(1);
    if !pointer_align.is_power_of_two() {
        return Err(err(
            m,
            "pointer_align",
            format!("{pointer_align} is not a power of two"),
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
    for out in &raw.outputs {
        if !dtypes.contains_key(out) {
            return Err(err(
                m,
                format!("dtypes.{out}"),
                "the output's dtype must be given",
            ));
        }
    }
    let scope_names = names.clone();
    let mut scratch_names: Vec<&str> = Vec::new();
    for (name, s) in &raw.scratch {
        let field = format!("scratch.{name}");
        if !usable_name(name) || names.contains(&name.as_str()) {
            return Err(err(
                m,
                field,
                format!("`{name}` is not a usable name or is already an argument or output"),
            ));
        }
        let code = DTypeCode::from_short_name(&s.dtype).ok_or_else(|| {
            err(
                m,
                format!("{field}.dtype"),
                format!("unknown dtype `{}` (use f16, bf16, f32, ...)", s.dtype),
            )
        })?;
        dtypes.insert(name.clone(), code);
        scratch_names.push(name);
    }
    let scope = Scope {
        manifest: m,
        dir,
        names: &scope_names,
        dtypes: &dtypes,
        scratch: &scratch_names,
        triton_version: raw.triton_version.as_deref(),
    };
    let scratch = raw
        .scratch
        .iter()
        .map(|(name, s)| {
            Ok(ScratchBuffer {
                name: name.clone(),
                dtype: dtypes[name],
                numel: scope.parse(&format!("scratch.{name}.numel"), &s.numel)?,
                numel_text: s.numel.clone(),
            })
        })
        .collect::<Result<Vec<_>, PackageError>>()?;
    let constraints = scope.parse_list("constraints", &raw.constraints)?;
    let kernels = launches
        .iter()
        .map(|(prefix, l)| load_kernel(&scope, prefix, l))
        .collect::<Result<Vec<_>, _>>()?;

    // Every output is written and every scratch buffer used by some launch's pointer.
    let passed = |n: &str| {
        kernels.iter().any(|k| {
            k.params
                .iter()
                .any(|p| matches!(p, Expr::Name(x) if x == n))
        })
    };
    for out in &raw.outputs {
        if !passed(out) {
            let field = if kernels.len() == 1 {
                "params"
            } else {
                "launch"
            };
            return Err(err(
                m,
                field,
                format!("the output `{out}` is not passed to the kernel"),
            ));
        }
    }
    for s in &scratch {
        if !passed(&s.name) {
            return Err(err(
                m,
                format!("scratch.{}", s.name),
                "no launch is passed this buffer",
            ));
        }
    }
    if let Some(k) = kernels.iter().find(|k| k.meta.arch != kernels[0].meta.arch) {
        return Err(err(
            m,
            "launch",
            format!(
                "`{}` is built for sm_{} but `{}` for sm_{}: a package targets one arch",
                k.kernel, k.meta.arch, kernels[0].kernel, kernels[0].meta.arch
            ),
        ));
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

    Ok(Package {
        dir: dir.to_path_buf(),
        symbol: raw.symbol,
        ptx_isa,
        description: raw.description,
        pointer_align,
        args: raw.args,
        outputs: raw.outputs,
        constraints,
        constraint_text: raw.constraints,
        dtypes,
        scratch,
        launches: kernels,
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
