//! `thunder ops`: every symbol (prims, ltorch, and ops that plugins declare), its layer, the
//! dtypes it supports, and which loaded executors claim it.
//!
//! Dtypes come from the OpInfo tables (`tests/opinfo`), whose harness checks that they are
//! exactly what each op's meta accepts. Claims are asked, not guessed: for each dtype, the op's
//! first OpInfo sample is traced and partitioned with each executor asked first and the
//! interpreter behind it, and we record whether that executor claimed all of it ("full") or
//! some ("partial"). Clang has no symbols of its own: its functions are Rust helpers that run
//! while ltorch decompositions are traced, so they never appear in a trace.

use crate::host_args::HostArgs;
use anyhow::Result;
use serde_json::{json, Value as Json};
use std::collections::HashSet;
use thunder_core::host::partition::partition;
use thunder_core::PluginHost;
use thunder_opinfo::{build, table, OpInfo};

const CLANG_NOTE: &str = "clang has no symbols: its functions (broadcasting, promotion, dims) \
     are Rust helpers called while ltorch ops are traced, so they never appear in a trace";

/// How much of an op's sample an executor took when asked first.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Claim {
    Full,
    Partial,
}

/// Loaded executors that are not asked (disabled, unavailable), with the reason.
fn inactive(args: &HostArgs) -> Result<Vec<(String, String)>> {
    Ok(args
        .host()?
        .entries()
        .iter()
        .filter(|e| !e.is_active())
        .map(|e| {
            let reason = match &e.available {
                Err(r) => r.clone(),
                Ok(()) => "disabled".to_string(),
            };
            (e.name.clone(), reason)
        })
        .collect())
}

/// One host per active executor, that executor first and the interpreter (if loaded) behind
/// it, so that a partial claim still partitions.
fn lineups(args: &HostArgs) -> Result<Vec<(String, PluginHost)>> {
    let host = args.host()?;
    let active: Vec<String> = host
        .entries()
        .iter()
        .filter(|e| e.is_active())
        .map(|e| e.name.clone())
        .collect();
    let fallback = active.iter().find(|n| *n == "interpreter").cloned();
    let mut out = Vec::new();
    for name in &active {
        let mut h = args.host()?;
        let mut order = vec![name.as_str()];
        if let Some(f) = fallback.as_deref().filter(|f| f != name) {
            order.push(f);
        }
        h.restrict_to(&order)?;
        out.push((name.clone(), h));
    }
    Ok(out)
}

/// What `executor` (asked first in `host`) claims of `info`'s first sample for each dtype.
fn claims(info: &OpInfo, executor: &str, host: &PluginHost) -> Vec<(&'static str, Claim)> {
    let mut out = Vec::new();
    let index = host.entries().iter().position(|e| e.name == executor);
    for &dtype in &info.dtypes {
        let Some(sample) = info.samples(dtype).into_iter().next() else {
            continue;
        };
        let Ok(built) = build(&info.id, &sample.args) else {
            continue;
        };
        // Not claimed at all is the normal answer of an executor that lacks the op; a
        // partition error (nobody behind it) says the same.
        let Ok(p) = partition(host, &built.trace, &HashSet::new()) else {
            continue;
        };
        let mine = p
            .regions
            .iter()
            .filter(|r| Some(r.executor) == index)
            .count();
        if mine > 0 {
            let claim = if mine == p.regions.len() {
                Claim::Full
            } else {
                Claim::Partial
            };
            out.push((dtype.short_name(), claim));
        }
    }
    out
}

fn claims_json(c: &[(&'static str, Claim)]) -> Json {
    let pick = |want: Claim| -> Vec<&str> {
        c.iter()
            .filter(|(_, v)| *v == want)
            .map(|(k, _)| *k)
            .collect()
    };
    json!({ "full": pick(Claim::Full), "partial": pick(Claim::Partial) })
}

fn layer_of(id: &str) -> &'static str {
    if id.starts_with("prims.") {
        "prims"
    } else {
        "ltorch"
    }
}

/// The op's declared signature (ltorch ops; prims take positional arguments only).
fn signature_text(id: &str) -> Option<String> {
    thunder_torch::signature(id).map(|s| s.to_string())
}

fn short(id: &str) -> &str {
    id.rsplit('.').next().unwrap_or(id)
}

pub fn run(args: &HostArgs, as_json: bool) -> Result<()> {
    let hosts = lineups(args)?;
    let mut symbols = Vec::new();
    for info in table() {
        let dtypes: Vec<&str> = info.dtypes.iter().map(|d| d.short_name()).collect();
        let mut by_executor = serde_json::Map::new();
        let mut text = Vec::new();
        for (name, host) in &hosts {
            let c = claims(info, name, host);
            if c.is_empty() {
                continue;
            }
            let all = c.len() == dtypes.len() && c.iter().all(|(_, v)| *v == Claim::Full);
            text.push(if all {
                format!("{name} (all)")
            } else {
                let list: Vec<String> = c
                    .iter()
                    .map(|(d, v)| match v {
                        Claim::Full => d.to_string(),
                        Claim::Partial => format!("{d}*"),
                    })
                    .collect();
                format!("{name} ({})", list.join(" "))
            });
            by_executor.insert(name.clone(), claims_json(&c));
        }
        symbols.push((info, dtypes, by_executor, text));
    }
    // Symbols the OpInfo tables do not cover yet (the harness fails until they do) are still
    // listed, without dtypes or claims.
    let uncovered: Vec<&str> = thunder_opinfo::symbol_ids()
        .into_iter()
        .filter(|id| thunder_opinfo::find(id).is_none())
        .collect();
    let custom: Vec<(String, String)> = hosts
        .first()
        .map(|(_, h)| {
            h.entries()
                .iter()
                .flat_map(|e| e.custom_ops.iter().map(|op| (op.clone(), e.name.clone())))
                .collect()
        })
        .unwrap_or_default();
    let executors: Vec<&str> = hosts.iter().map(|(n, _)| n.as_str()).collect();
    if as_json {
        let mut list: Vec<Json> = symbols
            .iter()
            .map(|(info, dtypes, claimed, _)| {
                json!({
                    "id": info.id,
                    "layer": info.layer.name(),
                    "signature": signature_text(&info.id),
                    "dtypes": dtypes,
                    "claimed_by": claimed,
                })
            })
            .collect();
        list.extend(uncovered.iter().map(|id| {
            json!({ "id": id, "layer": layer_of(id), "dtypes": [], "claimed_by": {}, "opinfo": false })
        }));
        list.extend(custom.iter().map(|(op, plugin)| {
            json!({ "id": op, "layer": "custom", "declared_by": plugin, "dtypes": [], "claimed_by": {} })
        }));
        let not_asked: Vec<Json> = inactive(args)?
            .into_iter()
            .map(|(name, reason)| json!({ "name": name, "reason": reason }))
            .collect();
        let out = json!({
            "executors": executors,
            "not_asked": not_asked,
            "symbols": list,
            "clang": CLANG_NOTE,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "{} symbols; executors asked (each first, interpreter behind): {}",
        symbols.len() + uncovered.len() + custom.len(),
        executors.join(", ")
    );
    for (name, reason) in inactive(args)? {
        println!("not asked: {name} ({reason})");
    }
    println!("claims per dtype; * = part of the op's decomposition only\n");
    for (info, dtypes, _, text) in &symbols {
        let claimed = if text.is_empty() {
            "no executor".to_string()
        } else {
            text.join(", ")
        };
        println!(
            "{:<36} {:<6} [{}]  {}",
            info.id,
            info.layer.name(),
            dtypes.join(" "),
            claimed
        );
        if let Some(sig) = signature_text(&info.id) {
            println!("    {}({sig})", short(&info.id));
        }
    }
    for id in &uncovered {
        println!("{id:<36} {:<6} (no OpInfo entry yet)", layer_of(id));
    }
    for (op, plugin) in &custom {
        println!("{op:<36} custom declared by {plugin}");
    }
    println!("\n{CLANG_NOTE}.");
    Ok(())
}
