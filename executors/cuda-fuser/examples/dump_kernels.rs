//! Writes the kernels cuda-fuser generates for a trace, one file each, in the format of
//! `tests/golden` (a `// launch:` line, then the source), for `scripts/gpu/kernel_lab.py`:
//!
//!     cargo run -p thunder-cuda-fuser --example dump_kernels -- TRACE.py OUT_DIR [NAME]
//!
//! The trace is a `def computation(...)` program with its inputs annotated (as the goldens'
//! are); every op is decomposed to prims and the whole trace planned as one region, for an
//! H100 (227 KiB of shared memory a block, clusters). `THUNDER_CUDA_FUSER_ROWS` sets the row
//! tuning as on the device. Kernels go to `OUT_DIR/NAME_K.cu` (NAME: the trace's file stem).

use std::path::{Path, PathBuf};
use thunder_core::host::view::trace_view;
use thunder_core::ir::BoundSymbol;
use thunder_cuda_fuser::{codegen, plan, support};

fn leaves(b: &BoundSymbol, out: &mut Vec<BoundSymbol>) {
    if b.subsymbols.is_empty() {
        out.push(b.clone());
    } else {
        for s in &b.subsymbols {
            leaves(s, out);
        }
    }
}

fn run(trace_path: &Path, out_dir: &Path, name: &str) -> Result<usize, String> {
    let text = std::fs::read_to_string(trace_path)
        .map_err(|e| format!("{}: {e}", trace_path.display()))?;
    let trace =
        thunder_torch::parse_trace(&text).map_err(|e| format!("{}: {e}", trace_path.display()))?;
    let mut flat = Vec::new();
    for b in &trace.bsyms {
        leaves(b, &mut flat);
    }
    let view = trace_view(&trace, &flat);
    if let Some(op) = view.ops.iter().find(|op| !support::accepts(&view, op)) {
        return Err(format!("cuda-fuser does not take {}", op.symbol));
    }
    let ops: Vec<u32> = (0..view.ops.len() as u32).collect();
    let kernels = plan::plan(&view, &ops, &view.outputs).map_err(|e| format!("{e:?}"))?;
    let target = codegen::Target {
        max_shared_bytes: 227 * 1024 - 1024,
        clusters: true,
    };
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    for (i, k) in kernels.iter().enumerate() {
        let g = codegen::generate_for(k, "thunder_fused_0", target);
        let path = out_dir.join(format!("{name}_{i}.cu"));
        std::fs::write(&path, format!("// launch: {:?}\n{}", g.launch, g.source))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(kernels.len())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: dump_kernels TRACE.py OUT_DIR [NAME]");
        std::process::exit(2);
    }
    let trace = PathBuf::from(&args[0]);
    let stem = trace
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "kernel".into());
    let name = args.get(2).cloned().unwrap_or(stem);
    match run(&trace, Path::new(&args[1]), &name) {
        Ok(n) => println!("{n} kernel(s) written to {}", args[1]),
        Err(e) => {
            eprintln!("dump_kernels: {e}");
            std::process::exit(1);
        }
    }
}
