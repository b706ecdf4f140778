use super::load_program;
use crate::host_args::HostArgs;
use anyhow::Result;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use thunder_core::host::partition::partition;
use thunder_core::Error;

/// Reports, per symbol, which executor runs it, and lists what no executor can run.
pub fn run(args: &HostArgs, program: &Path) -> Result<()> {
    let trace = load_program(program)?;
    let host = args.host()?;
    let active: Vec<&str> = host
        .entries()
        .iter()
        .filter(|e| e.is_active())
        .map(|e| e.name.as_str())
        .collect();
    println!(
        "executors asked, in order: {}",
        if active.is_empty() {
            "none".into()
        } else {
            active.join(", ")
        }
    );
    match partition(&host, &trace, &HashSet::new()) {
        Ok(part) => {
            let mut by_symbol: BTreeMap<(String, String), usize> = BTreeMap::new();
            for r in &part.regions {
                for &i in &r.ops {
                    let key = (
                        part.bsyms[i].sym.id.to_string(),
                        host.entries()[r.executor].name.clone(),
                    );
                    *by_symbol.entry(key).or_default() += 1;
                }
            }
            for ((sym, exec), n) in &by_symbol {
                println!("  {sym:<32} x{n:<4} -> {exec}");
            }
            for r in &part.rejections {
                println!("  rejected claim by {}: {}", r.executor, r.reason);
            }
            println!("{} regions; every op is supported.", part.regions.len());
            Ok(())
        }
        Err(Error::Unclaimed { ops }) => {
            println!("unsupported (no executor claims them):");
            for op in ops.split("; ") {
                println!("  {op}");
            }
            anyhow::bail!("the program has unsupported ops")
        }
        Err(e) => Err(e.into()),
    }
}
