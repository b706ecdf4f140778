//! `thunder ops --json`: every prim and ltorch op with its layer, dtypes and the executors
//! that claim it, asked of the plugins this workspace builds.

use std::process::Command;
use thunder_tests::{target_dir, thunder_binary};

/// A config naming the workspace's executors as built next to the test binary.
fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let lib = |name: &str| {
        target_dir().join(format!(
            "{}thunder_{name}{}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        ))
    };
    let text = format!(
        "[[executor]]\nname = \"cpu-simd\"\nlibrary = \"{}\"\npriority = 20\n\n\
         [[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\n",
        lib("cpu_simd").display(),
        lib("interpreter").display()
    );
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

fn thunder_ops(args: &[&str]) -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(thunder_binary())
        .arg("--config")
        .arg(config(dir.path()))
        .arg("ops")
        .args(args)
        .output()
        .expect("run thunder ops");
    assert!(
        out.status.success(),
        "thunder ops failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn ops_json() -> serde_json::Value {
    serde_json::from_slice(&thunder_ops(&["--json"])).expect("thunder ops --json prints JSON")
}

#[test]
fn ops_text_lists_symbols_and_executors() {
    let text = String::from_utf8(thunder_ops(&[])).expect("utf-8");
    assert!(
        text.contains("executors asked (each first, interpreter behind): cpu-simd, interpreter"),
        "{text}"
    );
    let add = text
        .lines()
        .find(|l| l.starts_with("ltorch.add "))
        .unwrap_or_else(|| panic!("no ltorch.add line:\n{text}"));
    assert!(
        add.contains("interpreter (all)") && add.contains("cpu-simd ("),
        "{add}"
    );
    assert!(text.contains("clang has no symbols"), "{text}");
}

fn symbol<'a>(json: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    json["symbols"]
        .as_array()
        .and_then(|s| s.iter().find(|e| e["id"] == id))
        .unwrap_or_else(|| panic!("{id} is not listed"))
}

fn strings(v: &serde_json::Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default()
}

#[test]
fn ops_json_lists_every_symbol_with_layer_dtypes_and_claims() {
    let json = ops_json();
    assert_eq!(strings(&json["executors"]), ["cpu-simd", "interpreter"]);
    let symbols = json["symbols"].as_array().expect("symbols");
    let count = |layer: &str| symbols.iter().filter(|s| s["layer"] == layer).count();
    assert_eq!(count("prims"), thunder_core::prims::Prim::ALL.len());
    assert_eq!(count("ltorch"), thunder_torch::symbols().len());
    assert!(json["clang"]
        .as_str()
        .is_some_and(|s| s.contains("no symbols")));

    // The interpreter runs every prim in every dtype the prim supports.
    for s in symbols.iter().filter(|s| s["layer"] == "prims") {
        let dtypes = strings(&s["dtypes"]);
        assert!(!dtypes.is_empty(), "{}: no dtypes", s["id"]);
        let full = strings(&s["claimed_by"]["interpreter"]["full"]);
        assert_eq!(
            full, dtypes,
            "{}: the interpreter does not claim it all",
            s["id"]
        );
    }

    // A real entry: ltorch.add in every dtype, cpu-simd claiming at least f32 whole.
    let add = symbol(&json, "ltorch.add");
    assert_eq!(add["layer"], "ltorch");
    assert_eq!(strings(&add["dtypes"]).len(), 10);
    assert!(
        strings(&add["claimed_by"]["cpu-simd"]["full"]).contains(&"f32"),
        "{add}"
    );
    // prims.exp is float-only, and cpu-simd leaves f16 to others.
    let exp = symbol(&json, "prims.exp");
    assert_eq!(strings(&exp["dtypes"]), ["f16", "bf16", "f32", "f64"]);
    assert!(!strings(&exp["claimed_by"]["cpu-simd"]["full"]).contains(&"f16"));
    // Half-type products are cpu-simd's too (regions of their own).
    let mm = symbol(&json, "prims.matmul");
    let mm_full = strings(&mm["claimed_by"]["cpu-simd"]["full"]);
    assert!(
        mm_full.contains(&"bf16") && mm_full.contains(&"f16"),
        "{mm}"
    );
}
