//! `thunder`: inspect plugins, run, trace, examine and draw programs written in trace text,
//! a demo, and a benchmark.

mod commands;
mod host_args;
mod inputs;
mod program_args;

use clap::{Parser, Subcommand};
use host_args::HostArgs;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "thunder",
    version,
    about = "A trace-based deep-learning compiler with plugin executors"
)]
struct Cli {
    #[command(flatten)]
    host: HostArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every plugin: path, version, ABI, priority, availability, load errors.
    Plugins {
        #[arg(long)]
        json: bool,
    },
    /// List every symbol (prims, ltorch, plugins' ops): layer, dtypes, and which loaded
    /// executors claim it per dtype.
    Ops {
        #[arg(long)]
        json: bool,
    },
    /// Run every OpInfo sample on a device with the configured executors and compare it with
    /// the interpreter on the CPU: what agrees, what differs, what nobody there can run.
    OpinfoCheck {
        /// `cpu`, `cuda` or `cuda:N`.
        #[arg(long, default_value = "cuda:0")]
        device: String,
        /// Only these ops (comma-separated ids such as prims.add).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        #[arg(long)]
        json: bool,
        /// The gradient fixtures to differentiate on the device too (a folder with
        /// manifest.json; default tests/fixtures/grads when it exists and --only is not given).
        #[arg(long)]
        grads: Option<PathBuf>,
        /// Skip the gradient samples.
        #[arg(long, conflicts_with = "grads")]
        no_grads: bool,
        /// Skip the OpInfo samples (with --grads: the gradient samples alone).
        #[arg(long)]
        no_samples: bool,
    },
    /// Run a program (trace text) on inputs and write its outputs as .npy files.
    Run {
        program: PathBuf,
        #[command(flatten)]
        io: program_args::InputArgs,
        /// Folder for out_0.npy, out_1.npy, ... (default: current folder).
        #[arg(long, default_value = ".")]
        out: PathBuf,
        /// Print the execution trace after running.
        #[arg(long)]
        print_trace: bool,
        /// Also differentiate the first output (a scalar loss) and write grad_NAME.npy.
        #[arg(long)]
        grad: bool,
        /// Inputs to differentiate with respect to (default: every floating-point input).
        #[arg(long, value_delimiter = ',', requires = "grad")]
        wrt: Vec<String>,
    },
    /// On a machine with a GPU: check every cuda-fuser sample against the interpreter and
    /// time the CUDA benchmarks (scripts/gpu/check.sh runs it beside PyTorch).
    GpuCheck {
        #[arg(long)]
        json: bool,
        /// Only the differential check.
        #[arg(long)]
        no_bench: bool,
    },
    /// On a machine with a GPU: check every shipped Triton kernel against the interpreter and
    /// time them (scripts/gpu/triton_check.sh).
    TritonCheck {
        #[arg(long)]
        json: bool,
        /// Only the differential check.
        #[arg(long)]
        no_bench: bool,
    },
    /// Print a program's trace at one stage.
    Trace {
        program: PathBuf,
        #[command(flatten)]
        io: program_args::InputArgs,
        #[arg(long, value_enum, default_value = "final")]
        stage: commands::trace::Stage,
    },
    /// Say which executor claims each op of a program and what nobody can run (and why);
    /// with inputs, compare its outputs with the interpreter's.
    /// With inputs (`-i`; inputs not given are generated with randn), runs the program on the
    /// configured executors and on the interpreter alone and reports the max abs/rel difference
    /// per output; with `--device`, examines it there against the interpreter on the CPU.
    Examine {
        program: PathBuf,
        #[command(flatten)]
        io: program_args::InputArgs,
        /// Compare with the interpreter on randn inputs (as if every input were left out).
        #[arg(long)]
        random_inputs: bool,
    },
    /// Write the execution trace as a Graphviz graph: one cluster per region, colored by
    /// executor (DOT on stdout unless --dot or --svg is given).
    Partition {
        program: PathBuf,
        #[command(flatten)]
        io: program_args::InputArgs,
        /// Write the graph (DOT) here.
        #[arg(long)]
        dot: Option<PathBuf>,
        /// Also render it to SVG with Graphviz's `dot` program.
        #[arg(long)]
        svg: Option<PathBuf>,
    },
    /// Time the CPU workloads of the performance targets (elementwise chains on 2^24 f32,
    /// sgemm 2048, a cached call, an MLP train step, a GPT-2 block forward and backward) on the
    /// configured executors, next to the machine's copy bandwidth.
    ///
    /// With PROGRAM: time that program on its inputs (`-i`), trtexec-style: the first call
    /// (parse, passes, claims, compile, run), then steady-state calls (median, min, samples)
    /// and where the time goes, region by region (executor, region, share).
    Bench {
        /// A program (trace text) to time instead of the fixed workloads.
        program: Option<PathBuf>,
        #[command(flatten)]
        io: program_args::InputArgs,
        /// With PROGRAM: time the forward and backward of its first output (value and grad).
        #[arg(long, requires = "program")]
        grad: bool,
        /// With PROGRAM: write the execution traces (each region and what it runs) to stderr.
        #[arg(long, requires = "program")]
        print_traces: bool,
        /// Print machine-readable results (docs/bench-json.md describes them).
        #[arg(long)]
        json: bool,
        /// Only these workloads (comma-separated; `--list` names them).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Leave these workloads out (comma-separated).
        #[arg(long, value_delimiter = ',')]
        skip: Vec<String>,
        /// Timed samples per workload (default: as many as fit in --min-time, at least 3).
        #[arg(long)]
        reps: Option<usize>,
        /// Seconds of timed samples per workload when --reps is not given.
        #[arg(long, default_value_t = 0.3)]
        min_time: f64,
        /// List the workloads and exit.
        #[arg(long)]
        list: bool,
    },
    /// Train an MLP on the digits dataset through the jit and autograd; show every stage.
    Demo {
        /// Folder with images.npy and labels.npy.
        #[arg(long, default_value = "data/digits")]
        data: PathBuf,
        #[arg(long, default_value_t = 20)]
        epochs: usize,
        #[arg(long, default_value_t = 64)]
        batch: usize,
        #[arg(long, default_value_t = 0.05)]
        lr: f64,
        /// Do not print the forward and backward execution traces.
        #[arg(long)]
        quiet: bool,
        /// Train on this device (`cpu`, `cuda`, `cuda:N`): parameters, optimizer state and
        /// batches live there; only the loss and the logits come back for printing.
        #[arg(long, default_value = "cpu")]
        device: String,
    },
}

fn main() -> ExitCode {
    // Trace text, `thunder ops` and the OpInfo tables name ltorch ops: register them first.
    thunder_torch::register();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("THUNDER_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plugins { json } => commands::plugins::run(&cli.host, json),
        Command::Ops { json } => commands::ops::run(&cli.host, json),
        Command::Run {
            program,
            out,
            print_trace,
            grad,
            wrt,
            io,
        } => {
            let grad = grad.then_some(wrt.as_slice());
            let options = commands::run::RunOptions { print_trace, grad };
            commands::run::run(&cli.host, &program, &io, &out, &options)
        }
        Command::GpuCheck { json, no_bench } => commands::gpu_check::run(&cli.host, json, no_bench),
        Command::TritonCheck { json, no_bench } => {
            commands::triton_check::run(&cli.host, json, no_bench)
        }
        Command::OpinfoCheck {
            device,
            only,
            json,
            grads,
            no_grads,
            no_samples,
        } => {
            let default = PathBuf::from("tests/fixtures/grads");
            let grads = match grads {
                Some(dir) => Some(dir),
                None if !no_grads && only.is_empty() && default.join("manifest.json").exists() => {
                    Some(default)
                }
                None => None,
            };
            commands::opinfo_check::run(
                &cli.host,
                &commands::opinfo_check::OpinfoCheckOptions {
                    device: &device,
                    only: &only,
                    json,
                    grads: grads.as_deref(),
                    samples: !no_samples,
                },
            )
        }
        Command::Trace { program, io, stage } => {
            commands::trace::run(&cli.host, &program, &io, stage)
        }
        Command::Examine {
            program,
            io,
            random_inputs,
        } => commands::examine::run(&cli.host, &program, &io, random_inputs),
        Command::Partition {
            program,
            io,
            dot,
            svg,
        } => commands::partition::run(&cli.host, &program, &io, dot.as_deref(), svg.as_deref()),
        Command::Bench {
            program: Some(program),
            io,
            grad,
            print_traces,
            json,
            reps,
            min_time,
            ..
        } => commands::bench_program::run(
            &cli.host,
            &program,
            &io,
            &commands::bench_program::ProgramBenchOptions {
                grad,
                print_traces,
                json,
                reps,
                min_time,
            },
        ),
        Command::Bench {
            program: None,
            io,
            ..
        } if !io.inputs.is_empty() || io.device.is_some() => Err(anyhow::anyhow!(
            "bench: -i/--input and --device time a program: give it (`thunder bench PROGRAM -i ...`)"
        )),
        Command::Bench {
            program: None,
            json,
            only,
            skip,
            reps,
            min_time,
            list,
            ..
        } => commands::bench::run(
            &cli.host,
            &commands::bench::BenchOptions {
                json,
                only,
                skip,
                reps,
                min_time,
                list,
            },
        ),
        Command::Demo {
            data,
            epochs,
            batch,
            lr,
            quiet,
            device,
        } => commands::demo::run(
            &cli.host,
            &commands::demo::DemoOptions {
                data: &data,
                epochs,
                batch,
                lr,
                quiet_traces: quiet,
                device: &device,
            },
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
