//! `thunder partition PROGRAM --dot FILE [--svg FILE]`: the execution trace as a Graphviz
//! graph. One node per op (`t1 = prims.mul`), an edge per value an op reads, one cluster per
//! region labelled `executor.regionN` and filled with the executor's color, and the program's
//! inputs and outputs as their own shapes. Edges between regions are drawn bold: each is a
//! value handed from one region (often one executor) to another.

use crate::host_args::HostArgs;
use crate::program_args::InputArgs;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use thunder_core::host::exec_trace::ExecStep;
use thunder_core::ir::{BoundSymbol, Trace, Value};

/// (fill, border) pairs; an executor's color is picked by a stable hash of its name.
const PALETTE: [(&str, &str); 8] = [
    ("#cfe2f3", "#3d85c6"), // blue
    ("#d9ead3", "#6aa84f"), // green
    ("#fce5cd", "#e69138"), // orange
    ("#d9d2e9", "#8e7cc3"), // purple
    ("#fff2cc", "#bf9000"), // yellow
    ("#d0e0e3", "#45818e"), // teal
    ("#ead1dc", "#c27ba0"), // pink
    ("#f4cccc", "#cc0000"), // red
];

/// The reference executor, the one that takes whatever nobody else claims, is always grey.
const INTERPRETER_COLOR: (&str, &str) = ("#eeeeee", "#666666");

/// FNV-1a: stable across runs, platforms and Rust versions (unlike `DefaultHasher`).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A color per executor: the palette slot its name hashes to, or the next free one when two
/// executors of this graph hash to the same slot (decided in name order, so it is stable).
pub fn executor_colors<'a>(
    executors: impl IntoIterator<Item = &'a str>,
) -> HashMap<String, (&'static str, &'static str)> {
    let names: BTreeSet<&str> = executors.into_iter().collect();
    let mut taken = [false; PALETTE.len()];
    let mut colors = HashMap::new();
    for name in names {
        if name == "interpreter" {
            colors.insert(name.to_string(), INTERPRETER_COLOR);
            continue;
        }
        let start = (fnv1a(name) % PALETTE.len() as u64) as usize;
        let slot = (0..PALETTE.len())
            .map(|k| (start + k) % PALETTE.len())
            .find(|&s| !taken[s])
            .unwrap_or(start);
        taken[slot] = true;
        colors.insert(name.to_string(), PALETTE[slot]);
    }
    colors
}

/// A DOT double-quoted string.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The op's line as printed in traces, without its subsymbols.
pub fn op_line(trace: &Trace, bsym: &BoundSymbol) -> String {
    let alone = BoundSymbol {
        subsymbols: Vec::new(),
        ..bsym.clone()
    };
    let mut line = String::new();
    thunder_core::text::print_bsym_lines(&mut line, trace, &alone, 0, false);
    line.trim_end().to_string()
}

/// The graph of an execution trace: its trace (decomposed as partitioned) and its steps.
pub fn to_dot(trace: &Trace, steps: &[ExecStep]) -> String {
    let colors = executor_colors(steps.iter().map(|s| s.executor.as_str()));
    let mut producer: HashMap<Value, String> = HashMap::new();
    let mut region_of: HashMap<String, usize> = HashMap::new();
    for (k, &v) in trace.inputs.iter().enumerate() {
        producer.insert(v, format!("in_{k}"));
    }
    for (r, step) in steps.iter().enumerate() {
        for &i in &step.ops {
            region_of.insert(format!("op_{i}"), r);
            for &v in &trace.bsyms[i].outputs {
                producer.insert(v, format!("op_{i}"));
            }
        }
    }
    let mut executors: Vec<&str> = Vec::new();
    for s in steps {
        if !executors.contains(&s.executor.as_str()) {
            executors.push(&s.executor);
        }
    }
    let op_count: usize = steps.iter().map(|s| s.ops.len()).sum();
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", quote(&trace.fn_name));
    let _ = writeln!(
        out,
        "  graph [rankdir=TB, fontname=\"Helvetica\", labelloc=t, label={}];",
        quote(&format!(
            "{}: {op_count} ops in {} regions ({})",
            trace.fn_name,
            steps.len(),
            executors.join(", ")
        ))
    );
    let _ = writeln!(out, "  node [fontname=\"Helvetica\", fontsize=11];");
    let _ = writeln!(out, "  edge [fontname=\"Helvetica\", fontsize=9];");
    let _ = writeln!(out);
    let _ = writeln!(out, "  // program inputs");
    for (k, &v) in trace.inputs.iter().enumerate() {
        let _ = writeln!(
            out,
            "  in_{k} [shape=invhouse, style=bold, label={}];",
            quote(&format!("{}\n{}", trace.name(v), trace.ty(v)))
        );
    }
    let rank = |out: &mut String, which: &str, prefix: &str, n: usize| {
        if n > 0 {
            let nodes: Vec<String> = (0..n).map(|k| format!("{prefix}_{k};")).collect();
            let _ = writeln!(out, "  {{ rank={which}; {} }}", nodes.join(" "));
        }
    };
    rank(&mut out, "source", "in", trace.inputs.len());
    for (r, step) in steps.iter().enumerate() {
        let (fill, border) = colors[&step.executor];
        let _ = writeln!(out);
        let _ = writeln!(out, "  subgraph cluster_region{r} {{");
        let _ = writeln!(
            out,
            "    label={}; style=\"rounded,filled\"; fillcolor=\"{fill}\"; color=\"{border}\";",
            quote(&format!("{}.region{r}", step.executor))
        );
        for &i in &step.ops {
            let b = &trace.bsyms[i];
            let names: Vec<&str> = b.outputs.iter().map(|&v| trace.name(v)).collect();
            let _ = writeln!(
                out,
                "    op_{i} [shape=box, style=\"rounded,filled\", fillcolor=white, color=\"{border}\", label={}, tooltip={}];",
                quote(&format!("{} = {}", names.join(", "), b.sym.id)),
                quote(&op_line(trace, b))
            );
        }
        let _ = writeln!(out, "  }}");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "  // program outputs");
    for (k, &v) in trace.outputs.iter().enumerate() {
        let _ = writeln!(
            out,
            "  out_{k} [shape=house, style=bold, label={}];",
            quote(&format!("output {k}: {}\n{}", trace.name(v), trace.ty(v)))
        );
    }
    rank(&mut out, "sink", "out", trace.outputs.len());
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  // data flow; bold edges cross from one region to another"
    );
    let edge = |out: &mut String, from: &str, to: &str, v: Value| {
        let crosses = match (region_of.get(from), region_of.get(to)) {
            (Some(a), Some(b)) => a != b,
            _ => false,
        };
        let style = if crosses { ", style=bold" } else { "" };
        let _ = writeln!(
            out,
            "  {from} -> {to} [label={}{style}];",
            quote(trace.name(v))
        );
    };
    for step in steps {
        for &i in &step.ops {
            let mut seen = Vec::new();
            for v in trace.bsyms[i].input_values() {
                if seen.contains(&v) {
                    continue;
                }
                seen.push(v);
                if let Some(from) = producer.get(&v) {
                    edge(&mut out, from, &format!("op_{i}"), v);
                }
            }
        }
    }
    for (k, &v) in trace.outputs.iter().enumerate() {
        if let Some(from) = producer.get(&v) {
            edge(&mut out, from, &format!("out_{k}"), v);
        }
    }
    let _ = writeln!(out, "}}");
    out
}

/// Renders DOT text to SVG with Graphviz's `dot`.
fn render_svg(dot_text: &str, svg: &Path, dot_file: Option<&Path>) -> Result<()> {
    let written = dot_file
        .map(|p| format!("; the graph was written to {}", p.display()))
        .unwrap_or_default();
    let dot_name = dot_file.map_or("FILE.dot".into(), |p| p.display().to_string());
    let mut child = match Command::new("dot")
        .arg("-Tsvg")
        .arg("-o")
        .arg(svg)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "--svg: Graphviz `dot` is not installed (not found on PATH){written}. Install \
             graphviz, or render the graph elsewhere with `dot -Tsvg {dot_name} -o {}`",
            svg.display()
        ),
        Err(e) => bail!("--svg: cannot run Graphviz `dot`: {e}{written}"),
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(dot_text.as_bytes())
            .context("--svg: cannot write the graph to `dot`")?;
    }
    let output = child
        .wait_with_output()
        .context("--svg: `dot` did not finish")?;
    if !output.status.success() {
        bail!(
            "--svg: `dot -Tsvg` failed ({}){written}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    println!("wrote {}", svg.display());
    Ok(())
}

/// Partitions and compiles the program (with the same fallbacks as `thunder run`) and writes
/// its execution trace as DOT: to `dot_file`, else to stdout unless only `--svg` is asked for.
pub fn run(
    args: &HostArgs,
    program: &Path,
    io: &InputArgs,
    dot_file: Option<&Path>,
    svg: Option<&Path>,
) -> Result<()> {
    let (trace, _) = io.load(program)?;
    let trace = match io.device()? {
        Some(d) => trace.on_device(d),
        None => trace,
    };
    let host = args.host()?;
    let (traces, _) = thunder_core::compile_trace(&host, trace)?;
    let et = &traces.execution;
    let text = to_dot(&et.trace, &et.steps);
    match dot_file {
        Some(path) => {
            std::fs::write(path, &text)
                .with_context(|| format!("{}: cannot write", path.display()))?;
            let ops: usize = et.steps.iter().map(|s| s.ops.len()).sum();
            println!(
                "wrote {}: {ops} ops in {} regions ({})",
                path.display(),
                et.steps.len(),
                et.executors_used().join(", ")
            );
        }
        None if svg.is_none() => print!("{text}"),
        None => {}
    }
    if let Some(svg) = svg {
        render_svg(&text, svg, dot_file)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use thunder_torch::parse_trace;

    fn step(executor: &str, ops: &[usize], inputs: &[u32], outputs: &[u32]) -> ExecStep {
        ExecStep {
            executor: executor.into(),
            ops: ops.to_vec(),
            inputs: inputs.iter().map(|&v| Value(v)).collect(),
            outputs: outputs.iter().map(|&v| Value(v)).collect(),
            frees: Vec::new(),
        }
    }

    #[test]
    fn regions_become_colored_clusters_and_values_become_edges() {
        let trace = parse_trace(
            "def computation(x, y):\n  # x: \"cpu f32[2]\"\n  # y: \"cpu f32[2]\"\n  a = prims.neg(x)\n  b = prims.mul(a, y)\n  c = prims.exp(b)\n  return (c, a)\n",
        )
        .unwrap();
        let id = |name: &str| {
            (0..trace.values.len() as u32)
                .find(|&v| trace.name(Value(v)) == name)
                .unwrap()
        };
        let (x, y, a, b, c) = (id("x"), id("y"), id("a"), id("b"), id("c"));
        let steps = [
            step("cpu-simd", &[0, 1], &[x, y], &[a, b]),
            step("interpreter", &[2], &[b], &[c]),
        ];
        let dot = to_dot(&trace, &steps);
        let colors = executor_colors(["cpu-simd", "interpreter"]);
        let (simd_fill, _) = colors["cpu-simd"];
        assert_ne!(simd_fill, colors["interpreter"].0);
        for line in [
            "digraph \"computation\" {",
            "  in_0 [shape=invhouse, style=bold, label=\"x\\ncpu f32[2]\"];",
            "  subgraph cluster_region0 {",
            &format!("    label=\"cpu-simd.region0\"; style=\"rounded,filled\"; fillcolor=\"{simd_fill}\";"),
            "    label=\"interpreter.region1\"; style=\"rounded,filled\"; fillcolor=\"#eeeeee\"; color=\"#666666\";",
            "  out_0 [shape=house, style=bold, label=\"output 0: c\\ncpu f32[2]\"];",
            "  in_0 -> op_0 [label=\"x\"];",
            "  in_1 -> op_1 [label=\"y\"];",
            "  op_0 -> op_1 [label=\"a\"];",
            "  op_1 -> op_2 [label=\"b\", style=bold];",
            "  op_2 -> out_0 [label=\"c\"];",
            "  op_0 -> out_1 [label=\"a\"];",
        ] {
            assert!(
                dot.lines().any(|l| l.starts_with(line)),
                "missing `{line}` in:\n{dot}"
            );
        }
        assert!(dot.contains("op_1 [shape=box") && dot.contains("label=\"b = prims.mul\""));
        assert!(dot.contains("tooltip=\"b = prims.mul(a, y)  # b: \\\"cpu f32[2]\\\"\""));
        assert_eq!(dot.matches("subgraph cluster_").count(), 2);
        assert_eq!(dot.matches(" -> ").count(), 6);
    }

    #[test]
    fn colors_are_stable_and_distinct_within_a_graph() {
        let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let first = executor_colors(names);
        let again = executor_colors(names.iter().rev().copied());
        assert_eq!(first, again);
        let distinct: BTreeSet<_> = first.values().collect();
        assert_eq!(distinct.len(), names.len());
        // The interpreter's grey takes no palette slot from the others.
        assert_eq!(
            executor_colors(["cuda-fuser"])["cuda-fuser"],
            executor_colors(["cuda-fuser", "interpreter"])["cuda-fuser"]
        );
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(quote("a \"b\"\\\nc"), "\"a \\\"b\\\"\\\\\\nc\"");
    }
}
