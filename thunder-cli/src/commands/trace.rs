use crate::host_args::HostArgs;
use crate::program_args::InputArgs;
use anyhow::Result;
use std::path::Path;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Stage {
    /// As written (parsed and checked).
    Initial,
    /// After the passes (DCE, CSE).
    Final,
    /// After claiming: region calls per executor, with `del` lines.
    Execution,
}

pub fn run(args: &HostArgs, program: &Path, io: &InputArgs, stage: Stage) -> Result<()> {
    let (trace, _) = io.load(program)?;
    let trace = match io.device()? {
        Some(d) => trace.on_device(d),
        None => trace,
    };
    match stage {
        Stage::Initial => print!("{}", thunder_core::text::print_trace(&trace)),
        Stage::Final | Stage::Execution => {
            let host = match stage {
                Stage::Execution => args.host()?,
                _ => thunder_core::PluginHost::empty(),
            };
            if let Stage::Final = stage {
                let mut t = trace;
                for pass in thunder_core::passes::default_passes() {
                    t = pass.run(&t)?;
                }
                print!("{}", thunder_core::text::print_trace(&t));
                return Ok(());
            }
            let (traces, _) = thunder_core::compile_trace(&host, trace)?;
            print!("{}", traces.execution.print());
        }
    }
    Ok(())
}
