//! Broken packages of several launches (`[[launch]]` tables, `[scratch]` buffers, several
//! outputs), written to a temp folder from the shipped attention backward with one thing
//! changed: each is refused with an error naming the file and the field as the manifest spells
//! it (`launch[1].params[4]`, `scratch.delta.dtype`).

use std::path::{Path, PathBuf};
use thunder_triton::package::{self, PackageError};
use thunder_triton::BUNDLED_DIR;

const GOOD: &str = "sdpa_bwd_bf16_d64_causal";

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

fn replace(from: &'static str, to: &'static str) -> impl Fn(String) -> String {
    move |t: String| t.replacen(from, to, 1)
}

fn check(e: &PackageError, file: &str, field: &str, msg: &str) {
    assert!(e.file.ends_with(file), "{e}: wanted file {file}");
    assert_eq!(e.field, field, "{e}");
    assert!(e.message.contains(msg), "{e}: wanted `{msg}`");
    let shown = e.to_string();
    assert!(shown.contains(file) && shown.contains(field), "{shown}");
}

#[test]
fn the_good_package_has_two_launches_sharing_a_scratch_buffer() {
    let p = package::load(&Path::new(BUNDLED_DIR).join(GOOD)).expect("loads");
    assert_eq!(p.symbol, "ltorch.sdpa_bwd");
    assert_eq!(p.outputs, ["dq", "dk", "dv"]);
    assert_eq!(
        p.launches
            .iter()
            .map(|k| k.kernel.as_str())
            .collect::<Vec<_>>(),
        ["attn_bwd_preprocess", "attn_bwd"]
    );
    assert_eq!(p.scratch.len(), 1);
    assert_eq!(p.scratch[0].name, "delta");
    assert_eq!(p.scratch[0].dtype.short_name(), "f32");
    assert_eq!(p.dtypes["lse"].short_name(), "f32");
}

#[test]
fn launch_and_scratch_errors_name_the_file_and_field() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let r = tmp.path();
    let m = "kernel.toml";
    let cases: Vec<(&str, PathBuf, &str, &str, &str)> = vec![
        (
            "flat key beside tables",
            broken(r, "a", m, |t| t.replacen("ptx_isa = ", "kernel = \"attn_bwd\"\nptx_isa = ", 1)),
            m,
            "kernel",
            "given beside [[launch]] tables",
        ),
        (
            "pointer dtype in the second launch",
            broken(
                r,
                "b",
                m,
                replace("params = [\"q\", \"k\", \"v\", \"do\", \"lse\"", "params = [\"q\", \"k\", \"v\", \"do\", \"o\""),
            ),
            m,
            "launch[1].params[4]",
            "`o` is bf16 but signature[4] points at f32",
        ),
        (
            "missing cubin of the first launch",
            broken(r, "c", m, replace("cubin = \"attn_bwd_preprocess.cubin\"", "cubin = \"nope.cubin\"")),
            m,
            "launch[0].cubin",
            "does not exist",
        ),
        (
            "metadata of the other kernel",
            broken(r, "d", m, replace("metadata = \"attn_bwd.json\"", "metadata = \"attn_bwd_preprocess.json\"")),
            "attn_bwd_preprocess.json",
            "name",
            "the kernel is `attn_bwd_preprocess` but kernel.toml says `launch[1].kernel = \"attn_bwd\"`",
        ),
        (
            "unknown key in a launch table",
            broken(r, "e", m, replace("kernel = \"attn_bwd\"\n", "kernel = \"attn_bwd\"\nblocks = 3\n")),
            m,
            "blocks",
            "unknown field `blocks`",
        ),
        (
            "unknown scratch dtype",
            broken(r, "f", m, replace("delta = { dtype = \"f32\"", "delta = { dtype = \"float\"")),
            m,
            "scratch.delta.dtype",
            "unknown dtype `float`",
        ),
        (
            "scratch named like an argument",
            broken(r, "g", m, replace("delta = { dtype", "lse = { dtype")),
            m,
            "scratch.lse",
            "already an argument or output",
        ),
        (
            "scratch size naming an unknown tensor",
            broken(r, "h", m, replace("numel = \"q.shape[0]", "numel = \"x.shape[0]")),
            m,
            "scratch.delta.numel",
            "`x` is not one of `args` or `outputs`",
        ),
        (
            "scratch in a constraint",
            broken(r, "i", m, replace("constraints = [\"q.rank == 4\"", "constraints = [\"delta.rank == 1\"")),
            m,
            "constraints[0]",
            "`delta` is a scratch buffer; only pointer parameters may name it",
        ),
        (
            "scratch no launch uses",
            broken(r, "j", m, |t| {
                t.replacen("[scratch]\n", "[scratch]\nunused = { dtype = \"f32\", numel = \"1\" }\n", 1)
            }),
            m,
            "scratch.unused",
            "no launch is passed this buffer",
        ),
        (
            "an output no launch writes",
            broken(r, "k", m, replace("\"dq\", \"dk\", \"dv\", \"default(", "\"dq\", \"dk\", \"dk\", \"default(")),
            m,
            "launch",
            "the output `dv` is not passed to the kernel",
        ),
        (
            "an output without a dtype",
            broken(r, "l", m, replace("dv = \"bf16\"\n", "")),
            m,
            "dtypes.dv",
            "the output's dtype must be given",
        ),
        (
            "pointer alignment",
            broken(r, "m", m, replace("pointer_align = 16", "pointer_align = 12")),
            m,
            "pointer_align",
            "12 is not a power of two",
        ),
        (
            "no outputs",
            broken(r, "n", m, replace("outputs = [\"dq\", \"dk\", \"dv\"]", "outputs = []")),
            m,
            "outputs",
            "at least one output",
        ),
    ];
    for (what, dir, file, field, msg) in &cases {
        let e = package::load(dir).expect_err(what);
        eprintln!("{what}: {e}");
        check(&e, file, field, msg);
    }
}

#[test]
fn a_launch_built_for_another_arch_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Both the cubin and the metadata of the second launch say sm_80: consistent by
    // themselves, but a package targets one arch.
    let dir = broken(
        tmp.path(),
        "a",
        "attn_bwd.json",
        replace("\"arch\": 90", "\"arch\": 80"),
    );
    let cubin = dir.join("attn_bwd.cubin");
    let mut bytes = std::fs::read(&cubin).expect("cubin");
    bytes[0x30] = 80;
    std::fs::write(&cubin, bytes).expect("write");
    let e = package::load(&dir).expect_err("mixed archs");
    check(
        &e,
        "kernel.toml",
        "launch",
        "`attn_bwd` is built for sm_80 but `attn_bwd_preprocess` for sm_90",
    );
}
