use crate::host_args::HostArgs;
use anyhow::Result;
use serde_json::json;

pub fn run(args: &HostArgs, as_json: bool) -> Result<()> {
    let host = args.host()?;
    if as_json {
        let executors: Vec<_> = host
            .entries()
            .iter()
            .map(|e| {
                json!({
                    "name": e.name,
                    "version": e.version,
                    "abi_version": e.abi_version.to_string(),
                    "path": e.path,
                    "priority": e.priority,
                    "listed": e.listed,
                    "enabled": e.enabled,
                    "available": e.available.is_ok(),
                    "unavailable_reason": e.available.as_ref().err(),
                    "devices": e.devices,
                    "symbols": e.symbols.len(),
                    "description": e.description,
                    "custom_ops": e.custom_ops,
                    "run_fallback": e.run_fallback,
                    "skip": e.skip,
                })
            })
            .collect();
        let issues: Vec<_> = host
            .issues()
            .iter()
            .map(|i| json!({"path": i.path, "executor": i.executor, "message": i.message}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"executors": executors, "load_errors": issues}))?
        );
        return Ok(());
    }
    if host.entries().is_empty() {
        println!(
            "no executor plugins loaded (build them with `cargo build --release --workspace`)"
        );
    }
    for e in host.entries() {
        let status = match &e.available {
            Ok(()) if e.enabled => "available".to_string(),
            Ok(()) => "disabled".to_string(),
            Err(reason) => format!("unavailable: {reason}"),
        };
        println!(
            "{} {} (ABI {}) priority {} [{}]",
            e.name, e.version, e.abi_version, e.priority, status
        );
        println!("    path: {}", e.path.display());
        println!(
            "    devices: {}; {} symbols; {}",
            e.devices.join(", "),
            e.symbols.len(),
            e.description
        );
        if !e.custom_ops.is_empty() {
            println!("    declares ops: {}", e.custom_ops.join(", "));
        }
        if !e.skip.is_empty() {
            println!("    not asked about (skip): {}", e.skip.join(", "));
        }
    }
    for i in host.issues() {
        let what = i
            .executor
            .clone()
            .or_else(|| i.path.as_ref().map(|p| p.display().to_string()))
            .unwrap_or_default();
        println!("load error: {what}: {}", i.message);
    }
    Ok(())
}
