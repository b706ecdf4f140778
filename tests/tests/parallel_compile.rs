//! Regions compiled on several threads (`THUNDER_COMPILE_THREADS=4`, read at each compile; this
//! binary sets it once for all its tests): the program is the same as compiled one region after
//! another, results and fallbacks included. A chain of five (neg, exp, add) segments for the
//! faulty plugin, each followed by a mul it cannot claim: ten regions over two executors.

use thunder_core::host::Config;
use thunder_core::{compile_trace, Array, PluginHost};
use thunder_tests::{close, interpreter_host, interpreter_library, target_dir};
use thunder_torch::parse_trace;

fn program() -> String {
    let mut text = String::from(
        "def computation(x, y):\n  # x: \"cpu f32[2, 3]\"\n  # y: \"cpu f32[2, 3]\"\n  d0 = prims.mul(x, y)\n",
    );
    for i in 0..5 {
        let j = i + 1;
        text += &format!(
            "  a{i} = prims.neg(d{i})\n  b{i} = prims.exp(a{i})\n  c{i} = prims.add(a{i}, b{i})\n  d{j} = prims.mul(c{i}, y)\n"
        );
    }
    text + "  return (d5,)\n"
}

fn inputs() -> Vec<Array> {
    vec![
        Array::from_slice(&[0.5f32, -1.0, 2.0, 0.0, -3.5, 1.25], &[2, 3]).unwrap(),
        Array::from_slice(&[0.1f32, 0.2, -0.1, 0.3, 0.05, -0.2], &[2, 3]).unwrap(),
    ]
}

fn faulty_host(fault: &str) -> PluginHost {
    let faulty = target_dir().join(format!(
        "{}thunder_test_faulty{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        faulty.exists(),
        "build the workspace first: {}",
        faulty.display()
    );
    let text = format!(
        "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\npriority = 0\n\n\
         [[executor]]\nname = \"faulty\"\nlibrary = \"{}\"\npriority = 10\n\
         [executor.options]\nfault = \"{fault}\"\n",
        interpreter_library().display(),
        faulty.display()
    );
    let host = PluginHost::load(&Config::parse(&text, "plugins.toml".as_ref()).unwrap(), &[]);
    assert!(host.issues().is_empty(), "{:?}", host.issues());
    host
}

fn run(host: &PluginHost) -> (Vec<f32>, Vec<String>, Vec<String>) {
    let (traces, program) = compile_trace(host, parse_trace(&program()).unwrap()).unwrap();
    let out = program.run(&inputs()).unwrap()[0].to_vec::<f32>().unwrap();
    let stages = program
        .build_stages()
        .iter()
        .map(|(s, _)| s.clone())
        .collect();
    (out, traces.execution.executors_used(), stages)
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert!(
        got.len() == want.len()
            && got
                .iter()
                .zip(want)
                .all(|(&g, &w)| close(g as f64, w as f64, 1e-6, 0.0, false)),
        "{got:?} vs {want:?}"
    );
}

#[test]
fn regions_compiled_on_four_threads_give_the_same_program() {
    std::env::set_var("THUNDER_COMPILE_THREADS", "4");
    let (want, _, _) = run(&interpreter_host());
    let (got, executors, stages) = run(&faulty_host("none"));
    assert_close(&got, &want);
    assert_eq!(executors, ["interpreter", "faulty"]);
    assert_eq!(
        stages.last().map(String::as_str),
        Some("compile, elapsed (4 threads)"),
        "{stages:?}"
    );
    assert!(
        stages.iter().any(|s| s == "compile faulty (5 regions)"),
        "{stages:?}"
    );
}

#[test]
fn a_compile_failure_on_one_thread_still_falls_back() {
    std::env::set_var("THUNDER_COMPILE_THREADS", "4");
    let (want, _, _) = run(&interpreter_host());
    let (got, executors, _) = run(&faulty_host("error_compile"));
    assert_close(&got, &want);
    assert_eq!(executors, ["interpreter"]);
}
