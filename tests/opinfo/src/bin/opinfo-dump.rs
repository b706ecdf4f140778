//! `opinfo-dump DIR`: writes every OpInfo sample into DIR for
//! `scripts/gen_opinfo_fixtures.py`, which evaluates them in PyTorch.
//! `opinfo-dump --errors`: prints what tracing each error case returns (for writing the
//! expected substrings of new cases).

use std::process::ExitCode;

fn print_errors() {
    for info in thunder_opinfo::table() {
        for case in info.error_cases() {
            let got = match thunder_opinfo::build(&info.id, &case.args) {
                Ok(_) => "traces (a run-time case, or a missing check)".to_string(),
                Err(e) => e.to_string(),
            };
            println!(
                "{} | {} | expects `{}` | {got}",
                info.id, case.note, case.expect
            );
        }
    }
}

fn main() -> ExitCode {
    let Some(arg) = std::env::args_os().nth(1) else {
        eprintln!("usage: opinfo-dump DIR | opinfo-dump --errors");
        return ExitCode::FAILURE;
    };
    if arg == "--errors" {
        print_errors();
        return ExitCode::SUCCESS;
    }
    match thunder_opinfo::dump::write(std::path::Path::new(&arg)) {
        Ok(n) => {
            eprintln!(
                "opinfo-dump: {n} samples written to {}",
                arg.to_string_lossy()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("opinfo-dump: {e}");
            ExitCode::FAILURE
        }
    }
}
