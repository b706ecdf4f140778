//! The execution trace: the program as a list of region calls, each naming its executor and
//! showing the bound symbols it runs, with `del` lines from the delete-last-used pass.

use crate::ir::{Trace, Value};
use crate::text::print::{bsym_line, format_return};
use std::collections::HashMap;
use std::fmt::Write;

#[derive(Debug, Clone)]
pub struct ExecStep {
    pub executor: String,
    /// Indices into the execution trace's bound symbols.
    pub ops: Vec<usize>,
    pub inputs: Vec<Value>,
    pub outputs: Vec<Value>,
    /// Values whose last use is this step: freed right after it.
    pub frees: Vec<Value>,
}

/// What the host did about a misbehaving executor while building (or re-building) this
/// program: a rejected claim, a failed claim or compile, a run that failed and was re-run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub executor: String,
    pub message: String,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "plugin `{}`: {}", self.executor, self.message)
    }
}

#[derive(Debug, Clone)]
pub struct ExecutionTrace {
    /// Values, inputs and outputs of the program; `bsyms` as partitioned (decomposed).
    pub trace: Trace,
    pub steps: Vec<ExecStep>,
    /// Fallbacks that shaped this program, printed as `# Note:` lines at its top.
    pub notes: Vec<Note>,
    /// Inputs compiled as static (the same array on every call; see
    /// [`crate::runtime::compile_with_static`]), marked `(static)` where the inputs are listed.
    pub statics: Vec<Value>,
}

impl ExecutionTrace {
    /// Delete-last-used: frees every buffer right after the step that reads it last.
    /// Program outputs are never freed.
    pub fn delete_last_used(&mut self) {
        let mut last_use: HashMap<Value, usize> = HashMap::new();
        for (i, s) in self.steps.iter().enumerate() {
            for &v in s.inputs.iter().chain(&s.outputs) {
                last_use.insert(v, i);
            }
        }
        for v in &self.trace.outputs {
            last_use.remove(v);
        }
        for s in &mut self.steps {
            s.frees.clear();
        }
        let mut by_step: Vec<(usize, Value)> = last_use.into_iter().map(|(v, i)| (i, v)).collect();
        by_step.sort();
        for (i, v) in by_step {
            self.steps[i].frees.push(v);
        }
        self.trace.provenance = "Delete Last Used".into();
    }

    pub fn executors_used(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for s in &self.steps {
            if !names.contains(&s.executor) {
                names.push(s.executor.clone());
            }
        }
        names
    }

    pub fn print(&self) -> String {
        let t = &self.trace;
        let mut out = String::new();
        let _ = writeln!(out, "# Constructed by {}", t.provenance);
        let _ = writeln!(out, "# Executors: {}", self.executors_used().join(", "));
        for note in &self.notes {
            let _ = writeln!(out, "# Note: {note}");
        }
        let _ = writeln!(out, "def {}({}):", t.fn_name, t.input_names().join(", "));
        for &v in &t.inputs {
            let mark = if self.statics.contains(&v) {
                " (static)"
            } else {
                ""
            };
            let _ = writeln!(out, "  # {}: \"{}\"{mark}", t.name(v), t.ty(v));
        }
        for (k, s) in self.steps.iter().enumerate() {
            let outs: Vec<&str> = s.outputs.iter().map(|&v| t.name(v)).collect();
            let ins: Vec<&str> = s.inputs.iter().map(|&v| t.name(v)).collect();
            let types: Vec<String> = s
                .outputs
                .iter()
                .map(|&v| format!("{}: \"{}\"", t.name(v), t.ty(v)))
                .collect();
            let _ = writeln!(
                out,
                "  {} = {}.region{k}({})  # {}",
                outs.join(", "),
                s.executor,
                ins.join(", "),
                types.join(", ")
            );
            for &i in &s.ops {
                let _ = writeln!(out, "    # {}", bsym_line(t, &t.bsyms[i]));
            }
            if !s.frees.is_empty() {
                let names: Vec<&str> = s.frees.iter().map(|&v| t.name(v)).collect();
                let _ = writeln!(out, "  del {}", names.join(", "));
            }
        }
        let _ = writeln!(out, "  return {}", format_return(t));
        out
    }
}
