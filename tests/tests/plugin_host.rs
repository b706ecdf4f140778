//! The host loads the interpreter `.so` that cargo built, with its metadata, version
//! requirement and `enabled` switch. Libraries it must refuse (other ABI, bad layout, not a
//! plugin, truncated, hash mismatch, loose permissions) are rows of `fault_matrix.rs`.

use thunder_core::host::Config;
use thunder_core::PluginHost;
use thunder_tests::{interpreter_host, interpreter_library};

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
    let t = thunder_torch::parse_trace(
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
fn listed_but_missing_executor_is_reported() {
    let text = "[[executor]]\nname = \"ghost\"\npriority = 5\n";
    let host = PluginHost::load(&Config::parse(text, "t.toml".as_ref()).unwrap(), &[]);
    assert!(host.entries().is_empty());
    assert!(host.issues()[0]
        .message
        .contains("`ghost` is listed but no plugin of that name was found"));
}
