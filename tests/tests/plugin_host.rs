//! The host loads the interpreter `.so` that cargo built, checks ABI versions, and reports
//! libraries it cannot use without failing.

use std::path::PathBuf;
use thunder_core::host::Config;
use thunder_core::PluginHost;
use thunder_tests::{interpreter_config, interpreter_host, interpreter_library, target_dir};

fn lib(name: &str) -> PathBuf {
    let p = target_dir().join(format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        p.exists(),
        "{} is missing: build the workspace first",
        p.display()
    );
    p
}

#[test]
fn interpreter_plugin_loads_with_its_metadata() {
    let host = interpreter_host();
    let e = &host.entries()[0];
    assert_eq!(e.name, "interpreter");
    assert_eq!(e.version, "0.1.0");
    assert_eq!(e.abi_version, thunder_abi_version());
    assert_eq!(e.devices, vec!["cpu".to_string()]);
    assert!(
        e.symbols.iter().any(|s| s == "prims.matmul"),
        "{:?}",
        e.symbols
    );
    assert!(e.is_active() && e.listed);
    assert_eq!(e.path, interpreter_library());
}

fn thunder_abi_version() -> thunder_core::host::AbiVersion {
    thunder_core::host::HOST_ABI_VERSION
}

#[test]
fn other_abi_major_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        lib("thunder_test_wrong_abi"),
        dir.path().join("libwrong.so"),
    )
    .unwrap();
    let host = PluginHost::load(&interpreter_config(), &[dir.path().to_path_buf()]);
    assert_eq!(host.entries().len(), 1, "only the interpreter loads");
    assert_eq!(host.issues().len(), 1, "{:?}", host.issues());
    let msg = &host.issues()[0].message;
    assert!(msg.contains("2.0.0") && msg.contains("1.1.0"), "{msg}");
}

#[test]
fn libraries_that_are_not_plugins_are_skipped_or_reported() {
    let dir = tempfile::tempdir().unwrap();
    // Loadable, but without the entry symbol: skipped silently.
    std::fs::copy(
        lib("thunder_test_not_a_plugin"),
        dir.path().join("libother.so"),
    )
    .unwrap();
    // Not a library at all, and a truncated copy of a real plugin: reported, not fatal.
    std::fs::write(dir.path().join("libtext.so"), b"this is not an ELF file").unwrap();
    let bytes = std::fs::read(interpreter_library()).unwrap();
    std::fs::write(
        dir.path().join("libtruncated.so"),
        &bytes[..bytes.len().min(4096)],
    )
    .unwrap();
    let host = PluginHost::load(&interpreter_config(), &[dir.path().to_path_buf()]);
    assert_eq!(host.entries().len(), 1);
    let paths: Vec<String> = host
        .issues()
        .iter()
        .filter_map(|i| i.path.as_ref())
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(host.issues().len(), 2, "{:?}", host.issues());
    assert!(
        paths.iter().any(|p| p.ends_with("libtext.so"))
            && paths.iter().any(|p| p.ends_with("libtruncated.so")),
        "{paths:?}"
    );
    assert!(
        host.issues()
            .iter()
            .all(|i| i.message.contains("cannot load library")),
        "{:?}",
        host.issues()
    );
    // The host still runs programs.
    let t = thunder_core::text::parse_trace(
        "def computation(x):\n  # x: \"cpu f32[2]\"\n  y = ltorch.neg(x)\n  return (y,)\n",
    )
    .unwrap();
    let (_, p) = thunder_core::compile_trace(&host, t).unwrap();
    let x = thunder_core::Array::from_slice(&[1.0f32, -2.0], &[2]).unwrap();
    assert_eq!(
        p.run(&[x]).unwrap()[0].to_vec::<f32>().unwrap(),
        vec![-1.0, 2.0]
    );
}

#[test]
fn version_requirement_and_disabling() {
    let path = interpreter_library();
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\nrequires = \"^2\"\n",
        path.display()
    );
    let host = PluginHost::load(&Config::parse(&text, "t.toml".as_ref()).unwrap(), &[]);
    assert!(!host.entries()[0].is_active());
    assert!(
        host.issues()[0].message.contains("does not satisfy"),
        "{:?}",
        host.issues()
    );

    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\nenabled = false\n",
        path.display()
    );
    let host = PluginHost::load(&Config::parse(&text, "t.toml".as_ref()).unwrap(), &[]);
    assert!(!host.entries()[0].is_active());
    let t = thunder_core::text::parse_trace(
        "def computation(x):\n  # x: \"cpu f32[2]\"\n  y = ltorch.neg(x)\n  return (y,)\n",
    )
    .unwrap();
    let err = thunder_core::compile_trace(&host, t)
        .map(|_| ())
        .unwrap_err();
    assert!(
        err.to_string().contains("no executor can run prims.neg"),
        "{err}"
    );
}

#[test]
fn sha256_pin_is_checked() {
    let path = interpreter_library();
    let wrong = "0".repeat(64);
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\nsha256 = \"{wrong}\"\n",
        path.display()
    );
    let host = PluginHost::load(&Config::parse(&text, "t.toml".as_ref()).unwrap(), &[]);
    assert!(!host.entries()[0].is_active());
    assert!(
        host.issues()[0]
            .message
            .contains("does not match the pinned"),
        "{:?}",
        host.issues()
    );
}

#[test]
fn listed_but_missing_executor_is_reported() {
    let text = "[[executor]]\nname = \"ghost\"\npriority = 5\n";
    let host = PluginHost::load(&Config::parse(text, "t.toml".as_ref()).unwrap(), &[]);
    assert!(host.entries().is_empty());
    assert!(host.issues()[0]
        .message
        .contains("`ghost` is listed but no plugin of that name was found"));
}
