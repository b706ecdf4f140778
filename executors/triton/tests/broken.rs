//! Broken packages, written to a temp folder from a good one with one thing changed: each is
//! refused with an error naming the file and the field, and the good packages beside it still
//! load.

use std::path::{Path, PathBuf};
use thunder_triton::package::{self, PackageError};
use thunder_triton::BUNDLED_DIR;

const GOOD: &str = "rms_norm_bf16";

/// Copies the good package into `root/name`, then applies `edit` to the named file's text.
fn broken(root: &Path, name: &str, file: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let src = Path::new(BUNDLED_DIR).join(GOOD);
    let dst = root.join(name);
    std::fs::create_dir_all(&dst).expect("mkdir");
    for e in std::fs::read_dir(&src).expect("bundled package") {
        let p = e.expect("entry").path();
        std::fs::copy(&p, dst.join(p.file_name().expect("name"))).expect("copy");
    }
    let f = dst.join(file);
    let text = std::fs::read_to_string(&f).expect("text file");
    let new = edit(text.clone());
    assert_ne!(new, text, "{name}: the edit must change {file}");
    std::fs::write(&f, new).expect("write");
    dst
}

fn load_err(dir: &Path) -> PackageError {
    package::load(dir).expect_err("a broken package must be refused")
}

fn check(e: &PackageError, file: &str, field: &str, msg: &str) {
    assert!(e.file.ends_with(file), "{e}: wanted file {file}");
    assert_eq!(e.field, field, "{e}");
    assert!(e.message.contains(msg), "{e}: wanted `{msg}`");
    // The display names both, for logs and `thunder plugins`.
    let shown = e.to_string();
    assert!(shown.contains(file) && shown.contains(field), "{shown}");
}

fn replace(from: &'static str, to: &'static str) -> impl Fn(String) -> String {
    move |t: String| t.replacen(from, to, 1)
}

#[test]
fn manifest_errors_name_the_file_and_field() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let r = tmp.path();
    let m = "kernel.toml";
    let cases: Vec<(&str, PathBuf, &str, &str, &str)> = vec![
        (
            "missing grid",
            broken(r, "a", m, |t| {
                t.lines()
                    .filter(|l| !l.starts_with("grid"))
                    .collect::<Vec<_>>()
                    .join("\n")
            }),
            m,
            "grid",
            "missing field `grid`",
        ),
        (
            "unknown key",
            broken(r, "b", m, |t| format!("blocks = 3\n{t}")),
            m,
            "blocks",
            "unknown field `blocks`",
        ),
        (
            "wrong type",
            broken(
                r,
                "c",
                m,
                replace("symbol = \"ltorch.rms_norm\"", "symbol = 3"),
            ),
            m,
            "symbol",
            "invalid type",
        ),
        (
            "bad dtype",
            broken(r, "d", m, replace("y = \"bf16\"", "y = \"bfloat16\"")),
            m,
            "dtypes.y",
            "unknown dtype `bfloat16`",
        ),
        (
            "dtype of nothing",
            broken(r, "e", m, |t| format!("{t}z = \"f32\"\n")),
            m,
            "dtypes.z",
            "not one of `args` or `outputs`",
        ),
        (
            "pointer dtype",
            broken(r, "f", m, replace("weight = \"bf16\"", "weight = \"f16\"")),
            m,
            "params[1]",
            "`weight` is f16 but signature[1] points at bf16",
        ),
        (
            "param count",
            broken(r, "g", m, replace("\"x.shape[-1]\", ", "")),
            m,
            "params",
            "4 expressions for a signature of 5 parameters",
        ),
        (
            "syntax",
            broken(r, "h", m, replace("\"x.rank >= 1\"", "\"x.rank >= \"")),
            m,
            "constraints[1]",
            "expected a value, found the end",
        ),
        (
            "unknown name",
            broken(r, "i", m, replace("\"x.rank >= 1\"", "\"q.rank >= 1\"")),
            m,
            "constraints[1]",
            "`q` is not one of `args` or `outputs`",
        ),
        (
            "scalar as pointer",
            broken(
                r,
                "j",
                m,
                replace("params = [\"x\"", "params = [\"x.numel\""),
            ),
            m,
            "params[0]",
            "signature[0] is a pointer",
        ),
        (
            "grid arity",
            broken(
                r,
                "k",
                m,
                replace(
                    "grid = [\"x.numel / x.shape[-1]\", \"1\", \"1\"]",
                    "grid = [\"x.numel / x.shape[-1]\"]",
                ),
            ),
            m,
            "grid",
            "needs 3 expressions (x, y, z), got 1",
        ),
        (
            "constexpr param",
            broken(
                r,
                "l",
                m,
                replace("\"i32\", \"fp32\"]", "\"i32\", \"constexpr\"]"),
            ),
            m,
            "signature[4]",
            "constexprs are baked into the cubin",
        ),
        (
            "missing cubin",
            broken(
                r,
                "m",
                m,
                replace("cubin = \"rms_norm_fwd.cubin\"", "cubin = \"nope.cubin\""),
            ),
            m,
            "cubin",
            "does not exist",
        ),
        (
            "escaping path",
            broken(
                r,
                "n",
                m,
                replace(
                    "metadata = \"metadata.json\"",
                    "metadata = \"../metadata.json\"",
                ),
            ),
            m,
            "metadata",
            "inside the package folder",
        ),
        (
            "kernel name",
            broken(
                r,
                "o",
                m,
                replace("kernel = \"rms_norm_fwd\"", "kernel = \"rms_norm\""),
            ),
            "metadata.json",
            "name",
            "the kernel is `rms_norm_fwd`",
        ),
        (
            "bad ptx isa",
            broken(
                r,
                "p",
                m,
                replace("ptx_isa = \"8.8\"", "ptx_isa = \"eight\""),
            ),
            m,
            "ptx_isa",
            "not a version",
        ),
    ];
    for (what, dir, file, field, msg) in &cases {
        let e = load_err(dir);
        eprintln!("{what}: {e}");
        check(&e, file, field, msg);
    }
}

#[test]
fn metadata_errors_name_the_file_and_field() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let r = tmp.path();
    let md = "metadata.json";
    let cases: Vec<(PathBuf, &str, &str, &str)> = vec![
        (broken(r, "a", md, replace("\"num_warps\": 4", "\"num_warps\": 0")), md, "num_warps", "1 to 32 warps"),
        (broken(r, "b", md, replace("\"num_ctas\": 1", "\"num_ctas\": 2")), md, "num_ctas", "cluster launches are not supported"),
        (broken(r, "c", md, replace("\"launch_pdl\": false", "\"launch_pdl\": true")), md, "launch_pdl", "not supported"),
        (broken(r, "d", md, replace("\"arch\": 90", "\"arch\": \"ninety\"")), md, "target.arch", "not a compute capability"),
        (broken(r, "e", md, replace("\"name\": \"rms_norm_fwd\",", "")), md, "name", "missing field `name`"),
        (broken(r, "f", md, replace("\"global_scratch_align\": 1", "\"global_scratch_align\": 3")), md, "global_scratch_align", "not a power of two"),
        // Metadata of a Triton without profile scratch: the PTX entry has one parameter more
        // than the launcher would pass, which must be caught before any launch.
        (broken(r, "g", md, replace("\"profile_scratch_size\": 0,", "")), "rms_norm_fwd.ptx", "(entry)", "takes 7 parameters, but the signature has 5 and the metadata adds 1 scratch pointer(s): 6"),
    ];
    for (dir, file, field, msg) in &cases {
        let e = load_err(dir);
        eprintln!("{e}");
        check(&e, file, field, msg);
    }
}

#[test]
fn a_broken_package_is_reported_beside_the_good_ones() {
    let tmp = tempfile::tempdir().expect("tempdir");
    broken(
        tmp.path(),
        "bad",
        "kernel.toml",
        replace("symbol = \"ltorch.rms_norm\"", "symbol = \"rms_norm\""),
    );
    broken(
        tmp.path(),
        "good",
        "kernel.toml",
        replace("description = ", "description = \"copy\" # "),
    );
    std::fs::create_dir(tmp.path().join("not-a-package")).expect("mkdir");
    let (good, bad) = package::load_dir(tmp.path());
    assert_eq!(good.iter().map(|p| p.name()).collect::<Vec<_>>(), ["good"]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    check(&bad[0], "kernel.toml", "symbol", "is not a symbol id");
    assert!(bad[0].file.starts_with(tmp.path().join("bad")));
}

#[test]
fn a_signature_that_disagrees_with_the_ptx_types_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The kernel's N is an i32; declaring it fp32 would pass a float's bits.
    let dir = broken(
        tmp.path(),
        "a",
        "kernel.toml",
        replace(
            "\"*bf16\", \"i32\", \"fp32\"]",
            "\"*bf16\", \"fp32\", \"fp32\"]",
        ),
    );
    let e = load_err(&dir);
    check(
        &e,
        "rms_norm_fwd.ptx",
        "(entry)",
        "parameter 3 of `rms_norm_fwd` is .u32, which cannot carry fp32",
    );
}

#[test]
fn a_cubin_for_another_arch_than_the_metadata_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = broken(
        tmp.path(),
        "a",
        "kernel.toml",
        replace("description = ", "description = \"sm_80 cubin\" # "),
    );
    let cubin = dir.join("rms_norm_fwd.cubin");
    let mut bytes = std::fs::read(&cubin).expect("cubin");
    assert_eq!(
        package::cubin_sm(&bytes),
        Some(90),
        "the shipped cubin is sm_90"
    );
    bytes[0x30] = 80; // e_flags' SM byte
    std::fs::write(&cubin, bytes).expect("write");
    let e = load_err(&dir);
    check(
        &e,
        "kernel.toml",
        "cubin",
        "holds sm_80 code but metadata.json's target.arch is 90",
    );
}

/// The manifest example in docs/triton-kernels.md passes every check short of its files (which
/// the example does not ship): a typo in the documented format fails here.
#[test]
fn the_documented_manifest_example_validates() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/triton-kernels.md"),
    )
    .expect("docs/triton-kernels.md");
    let section = doc
        .split("### 4. The manifest")
        .nth(1)
        .expect("manifest section");
    let example = section
        .split("```toml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a toml block");
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("kernel.toml"), example).expect("write");
    let e = load_err(tmp.path());
    check(&e, "kernel.toml", "cubin", "gelu_fwd.cubin` does not exist");
}
