//! One kernel launch of a package: the cubin (and PTX), Triton's metadata, the kernel's
//! signature, one expression per parameter and the grid. A manifest describes one launch with
//! top-level keys, or several with `[[launch]]` tables; both are validated here.

use crate::expr::{self, Expr};
use crate::metadata::{load_metadata, Metadata};
use crate::package::{err, ptx_param_types, ptx_type_fits, PackageError, ParamType, MANIFEST};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thunder_abi::DTypeCode;

/// A `[[launch]]` table as written (the flat form's keys are gathered into one of these).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLaunch {
    pub kernel: String,
    pub cubin: String,
    #[serde(default)]
    pub ptx: Option<String>,
    #[serde(default = "default_metadata")]
    pub metadata: String,
    pub signature: Vec<String>,
    #[serde(default)]
    pub constexprs: BTreeMap<String, toml::Value>,
    pub params: Vec<String>,
    pub grid: Vec<String>,
}

pub(crate) fn default_metadata() -> String {
    "metadata.json".into()
}

/// One validated launch.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The cubin's entry (metadata.json's `name`).
    pub kernel: String,
    pub cubin: PathBuf,
    pub ptx: Option<PathBuf>,
    pub signature: Vec<ParamType>,
    pub params: Vec<Expr>,
    pub param_text: Vec<String>,
    pub grid: [Expr; 3],
    pub meta: Metadata,
}

/// What a launch's expressions may name: the op's tensors and literals (`names`), and the
/// package's scratch buffers, which only pointer parameters may name.
pub(crate) struct Scope<'a> {
    pub manifest: &'a Path,
    pub dir: &'a Path,
    pub names: &'a [&'a str],
    /// Pointer dtypes: the op's tensors and the scratch buffers.
    pub dtypes: &'a BTreeMap<String, DTypeCode>,
    pub scratch: &'a [&'a str],
    pub triton_version: Option<&'a str>,
}

impl Scope<'_> {
    /// Parses expressions of `field`; every name must be one of `names`.
    pub fn parse_list(&self, field: &str, list: &[String]) -> Result<Vec<Expr>, PackageError> {
        list.iter()
            .enumerate()
            .map(|(i, s)| self.parse(&format!("{field}[{i}]"), s))
            .collect()
    }

    pub fn parse(&self, field: &str, s: &str) -> Result<Expr, PackageError> {
        let m = self.manifest;
        let e = expr::parse(s).map_err(|e| err(m, field, format!("`{s}`: {e}")))?;
        let mut refs = Vec::new();
        e.names(&mut refs);
        for r in &refs {
            if self.scratch.contains(&r.as_str()) {
                return Err(err(
                    m,
                    field,
                    format!(
                        "`{s}`: `{r}` is a scratch buffer; only pointer parameters may name it"
                    ),
                ));
            }
            if !self.names.contains(&r.as_str()) {
                return Err(err(
                    m,
                    field,
                    format!("`{s}`: `{r}` is not one of `args` or `outputs`"),
                ));
            }
        }
        Ok(e)
    }

    /// A file named by `field`, inside the package folder.
    fn file_in(&self, field: &str, name: &str) -> Result<PathBuf, PackageError> {
        let p = self.dir.join(name);
        if name.contains("..") || Path::new(name).is_absolute() {
            return Err(err(
                self.manifest,
                field,
                format!("`{name}` must be a file inside the package folder"),
            ));
        }
        if !p.is_file() {
            return Err(err(
                self.manifest,
                field,
                format!("`{}` does not exist", p.display()),
            ));
        }
        Ok(p)
    }
}

/// Validates one launch. `prefix` is `""` for the flat form and `launch[i].` for a table, so
/// errors name the field as the manifest spells it.
pub(crate) fn load_kernel(
    scope: &Scope<'_>,
    prefix: &str,
    raw: &RawLaunch,
) -> Result<Kernel, PackageError> {
    let m = scope.manifest;
    let f = |name: &str| format!("{prefix}{name}");
    let signature = raw
        .signature
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if s == "constexpr" {
                return Err(err(
                    m,
                    f(&format!("signature[{i}]")),
                    "constexprs are baked into the cubin and are not parameters: list them under `constexprs`",
                ));
            }
            ParamType::parse(s).ok_or_else(|| {
                err(
                    m,
                    f(&format!("signature[{i}]")),
                    format!("unsupported type `{s}` (pointers *fp16, *bf16, *fp32, ...; scalars i32, i64, u32, u64, fp32, fp64)"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if raw.params.len() != signature.len() {
        return Err(err(
            m,
            f("params"),
            format!(
                "{} expressions for a signature of {} parameters",
                raw.params.len(),
                signature.len()
            ),
        ));
    }
    let mut params = Vec::with_capacity(raw.params.len());
    for (i, (text, ty)) in raw.params.iter().zip(&signature).enumerate() {
        let field = f(&format!("params[{i}]"));
        let name = text.trim();
        if let ParamType::Ptr(elem) = ty {
            // A pointer is a bare name: one of the op's tensors or a scratch buffer.
            let ok_name = scope.names.contains(&name) || scope.scratch.contains(&name);
            if !ok_name || expr::parse(text).ok() != Some(Expr::Name(name.to_string())) {
                return Err(err(
                    m,
                    field,
                    format!("signature[{i}] is a pointer: the expression must be a tensor's name, got `{text}`"),
                ));
            }
            match scope.dtypes.get(name) {
                Some(d) if d == elem => {}
                Some(d) => {
                    return Err(err(
                        m,
                        field,
                        format!(
                            "`{name}` is {} but signature[{i}] points at {}",
                            d.short_name(),
                            elem.short_name()
                        ),
                    ))
                }
                None => {
                    return Err(err(
                        m,
                        field,
                        format!("pointer argument `{name}` needs an entry in `dtypes`"),
                    ))
                }
            }
            params.push(Expr::Name(name.to_string()));
            continue;
        }
        let e = scope.parse(&field, text)?;
        if matches!(&e, Expr::Name(n) if scope.dtypes.contains_key(n)) {
            return Err(err(
                m,
                field,
                format!("`{name}` is a tensor but signature[{i}] is a scalar"),
            ));
        }
        params.push(e);
    }
    let grid_list = scope.parse_list(&f("grid"), &raw.grid)?;
    let grid: [Expr; 3] = match <[Expr; 3]>::try_from(grid_list) {
        Ok(g) => g,
        Err(v) => {
            return Err(err(
                m,
                f("grid"),
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
                f(&format!("constexprs.{k}")),
                "must be an integer, float or bool (informational: already baked in)",
            ));
        }
    }

    let cubin = scope.file_in(&f("cubin"), &raw.cubin)?;
    let ptx = raw
        .ptx
        .as_deref()
        .map(|p| scope.file_in(&f("ptx"), p))
        .transpose()?;
    let mdpath = scope.file_in(&f("metadata"), &raw.metadata)?;
    let meta = load_metadata(&mdpath)?;
    if meta.name != raw.kernel {
        return Err(err(
            &mdpath,
            "name",
            format!(
                "the kernel is `{}` but {MANIFEST} says `{}kernel = \"{}\"`",
                meta.name, prefix, raw.kernel
            ),
        ));
    }
    if let (Some(a), Some(b)) = (scope.triton_version, &meta.triton_version) {
        if a != b {
            return Err(err(
                m,
                "triton_version",
                format!("`{a}` but {} says `{b}`", raw.metadata),
            ));
        }
    }
    let cubin_bytes =
        std::fs::read(&cubin).map_err(|e| err(m, f("cubin"), format!("cannot read: {e}")))?;
    if !cubin_bytes.starts_with(b"\x7fELF") {
        return Err(err(
            m,
            f("cubin"),
            format!("`{}` is not an ELF cubin", cubin.display()),
        ));
    }
    if let Some(sm) = crate::binary::cubin_sm(&cubin_bytes) {
        if sm != meta.arch {
            return Err(err(
                m,
                f("cubin"),
                format!(
                    "`{}` holds sm_{sm} code but {}'s target.arch is {}",
                    cubin.display(),
                    raw.metadata,
                    meta.arch
                ),
            ));
        }
    }
    if let Some(ptx_path) = &ptx {
        check_ptx(ptx_path, raw, &signature, &meta, &f("ptx"), m)?;
    }
    Ok(Kernel {
        kernel: raw.kernel.clone(),
        cubin,
        ptx,
        signature,
        params,
        param_text: raw.params.clone(),
        grid,
        meta,
    })
}

/// The PTX entry takes exactly the signature's parameters and Triton's scratch pointers, each of
/// a PTX type that can carry it.
fn check_ptx(
    ptx_path: &Path,
    raw: &RawLaunch,
    signature: &[ParamType],
    meta: &Metadata,
    field: &str,
    manifest: &Path,
) -> Result<(), PackageError> {
    let text = std::fs::read_to_string(ptx_path)
        .map_err(|e| err(manifest, field, format!("cannot read: {e}")))?;
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
    Ok(())
}
