//! `thunder partition` (the execution trace as a Graphviz graph) and `thunder examine` (why ops
//! are unsupported, and outputs compared with the interpreter alone), through the binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use thunder_core::runtime::npy::write_npy;
use thunder_core::Array;
use thunder_tests::{interpreter_library, thunder_binary};

/// `y = x * w` (w broadcast over rows), `z = y + 1`: after decomposition
/// `broadcast_in_dim(w)`, `mul`, `add`, all claimed by the interpreter in one region.
const PROGRAM: &str = "def computation(x, w):\n  # x: \"cpu f32[2, 3]\"\n  # w: \"cpu f32[3]\"\n  y = ltorch.mul(x, w)\n  z = ltorch.add(y, 1.0)\n  return (z, y)\n";

fn write_config(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let path = dir.join(name);
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n{extra}",
        interpreter_library().display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prog.py"), PROGRAM).unwrap();
    write_config(dir.path(), "plugins.toml", "");
    write_npy(
        &dir.path().join("x.npy"),
        &Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap(),
    )
    .unwrap();
    dir
}

/// Runs `thunder` in `dir` with `--config <config>` unless `args` names one.
fn thunder_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(thunder_binary());
    cmd.current_dir(dir)
        .env_remove("THUNDER_CONFIG")
        .env_remove("THUNDER_EXECUTORS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    if !args.contains(&"--config") {
        cmd.arg("--config").arg(dir.join("plugins.toml"));
    }
    cmd.args(args).output().expect("run thunder")
}

fn thunder(dir: &Path, args: &[&str]) -> Output {
    thunder_with(dir, args, &[])
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn partition_dot_has_a_cluster_per_region_data_flow_edges_and_io_shapes() {
    let dir = setup();
    let o = thunder(dir.path(), &["partition", "prog.py", "--dot", "graph.dot"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("wrote graph.dot: 3 ops in 1 regions (interpreter)"),
        "{}",
        text(&o.stdout)
    );
    let dot = std::fs::read_to_string(dir.path().join("graph.dot")).unwrap();
    assert!(dot.starts_with("digraph \"computation\" {") && dot.trim_end().ends_with('}'));
    // One cluster, labelled with its executor and filled with the interpreter's grey.
    assert_eq!(dot.matches("subgraph cluster_").count(), 1, "{dot}");
    let want = [
        "subgraph cluster_region0 {",
        "label=\"interpreter.region0\"; style=\"rounded,filled\"; fillcolor=\"#eeeeee\"",
        // Inputs and outputs have their own shapes and show their types.
        "in_0 [shape=invhouse, style=bold, label=\"x\\ncpu f32[2, 3]\"];",
        "in_1 [shape=invhouse, style=bold, label=\"w\\ncpu f32[3]\"];",
        "out_0 [shape=house, style=bold, label=\"output 0: z\\ncpu f32[2, 3]\"];",
        "out_1 [shape=house, style=bold, label=\"output 1: y\\ncpu f32[2, 3]\"];",
        // Op nodes are labelled `output = symbol`.
        "op_0 [shape=box",
        "label=\"y = prims.mul\"",
        "label=\"z = prims.add\"",
        // Data flow: w -> broadcast -> mul <- x; mul -> add -> z; mul -> y.
        "in_1 -> op_0 [label=\"w\"];",
        "in_0 -> op_1 [label=\"x\"];",
        "op_0 -> op_1 [label=\"",
        "op_1 -> op_2 [label=\"y\"];",
        "op_2 -> out_0 [label=\"z\"];",
        "op_1 -> out_1 [label=\"y\"];",
    ];
    for w in want {
        assert!(dot.contains(w), "missing `{w}` in:\n{dot}");
    }
    assert!(
        dot.contains("op_0 [shape=box") && dot.contains("prims.broadcast_in_dim"),
        "{dot}"
    );
    assert_eq!(dot.matches(" -> ").count(), 6, "{dot}");
    // Every edge's endpoints are declared nodes.
    for line in dot.lines().filter(|l| l.contains(" -> ")) {
        let (from, rest) = line.trim().split_once(" -> ").unwrap();
        let to = rest.split_whitespace().next().unwrap();
        for node in [from, to] {
            assert!(
                dot.contains(&format!("  {node} [")),
                "edge `{line}` names an undeclared node `{node}`"
            );
        }
    }

    // Without --dot or --svg, the graph goes to stdout.
    let o = thunder(dir.path(), &["partition", "prog.py"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), dot);
}

#[test]
fn partition_svg_without_graphviz_is_a_clear_error_and_still_writes_the_dot() {
    let dir = setup();
    // An empty PATH: `dot` cannot be found whether or not Graphviz is installed.
    let o = thunder_with(
        dir.path(),
        &["partition", "prog.py", "--dot", "g.dot", "--svg", "g.svg"],
        &[("PATH", "")],
    );
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("Graphviz `dot` is not installed") && err.contains("written to g.dot"),
        "{err}"
    );
    assert!(dir.path().join("g.dot").exists());
    assert!(!dir.path().join("g.svg").exists());
}

#[test]
fn partition_svg_is_rendered_when_graphviz_is_installed() {
    let dir = setup();
    let o = thunder(dir.path(), &["partition", "prog.py", "--svg", "g.svg"]);
    if Command::new("dot").arg("-V").output().is_err() {
        // Without Graphviz the same command must fail with the clear error instead.
        assert!(
            !o.status.success() && text(&o.stderr).contains("Graphviz `dot` is not installed"),
            "{}",
            text(&o.stderr)
        );
        return;
    }
    assert!(o.status.success(), "{}", text(&o.stderr));
    let svg = std::fs::read_to_string(dir.path().join("g.svg")).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("interpreter.region0"),
        "{svg}"
    );
}

#[test]
fn examine_explains_why_ops_are_unsupported() {
    let dir = setup();
    let p = dir.path();
    let examine = |config: &str, program: &str| {
        let o = thunder(p, &["--config", config, "examine", program]);
        assert!(
            !o.status.success(),
            "unsupported ops must fail examine: {}",
            text(&o.stdout)
        );
        assert!(text(&o.stderr).contains("the program has unsupported ops"));
        text(&o.stdout)
    };

    // No executor at all: nobody implements the symbols.
    std::fs::write(p.join("empty.toml"), "").unwrap();
    let out = examine("empty.toml", "prog.py");
    assert!(
        out.contains("unsupported ops (no executor claims them):")
            && out.contains("prims.mul")
            && out.contains("no implementation: no loaded executor lists prims.mul (loaded: none)"),
        "{out}"
    );

    // The only executor that implements them is disabled: say which and why.
    write_config(p, "off.toml", "enabled = false\n");
    let out = examine("off.toml", "prog.py");
    assert!(
        out.contains("not asked: interpreter: disabled in plugins.toml")
            && out.contains("    interpreter: disabled in plugins.toml"),
        "{out}"
    );

    // Active and listing the symbol, but refusing its device: name the signature refused.
    std::fs::write(
        p.join("cuda.py"),
        "def computation(x):\n  # x: \"cuda:0 f32[4]\"\n  a = ltorch.neg(x)\n  return (a,)\n",
    )
    .unwrap();
    let out = examine("plugins.toml", "cuda.py");
    assert!(
        out.contains("prims.neg")
            && out.contains("e.g. a = prims.neg(x)  # a: \"cuda:0 f32[4]\"")
            && out.contains(
                "interpreter: lists it but did not claim it for (x: cuda:0 f32[4]) -> cuda:0 f32[4]"
            ),
        "{out}"
    );
}

#[test]
fn examine_with_inputs_compares_every_output_with_the_interpreter_alone() {
    let dir = setup();
    let p = dir.path();
    // x from a file, w generated from its annotation.
    let o = thunder(p, &["examine", "prog.py", "--input", "x=x.npy"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    assert!(
        out.contains("1 regions; every op is supported.")
            && out.contains("consistency: interpreter vs interpreter alone")
            && out.contains("generated inputs (seeded by name): w=randn:f32[3]")
            && out.contains("all 2 outputs match the interpreter within tolerance"),
        "{out}"
    );
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("  0 (z)") || l.starts_with("  1 (y)"))
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for row in rows {
        assert!(
            row.contains("cpu f32[2, 3]") && row.ends_with("ok") && row.contains("0.000e0"),
            "{row}"
        );
    }

    // Every input generated.
    let o = thunder(p, &["examine", "prog.py", "--random-inputs"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("x=randn:f32[2, 3], w=randn:f32[3]"));

    // Input errors are the same as `thunder run`'s.
    let o = thunder(p, &["examine", "prog.py", "-i", "v=ones:f32[3]"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("unknown input `v`; the program's inputs are: x, w"),
        "{}",
        text(&o.stderr)
    );
}
