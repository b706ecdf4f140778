//! Without a CUDA driver (CI, this machine) the CUDA pieces fail at run time with a clear
//! reason and never take the host down: the cuda-fuser plugin loads, says why it is unavailable
//! and is not asked to claim; device arrays and `--device cuda` report "no CUDA driver".
//! On a machine with a driver these tests say so and check nothing: the GPU script
//! (scripts/gpu/check.sh) covers that side.

use std::process::Command;
use thunder_core::{Array, Device};
use thunder_tests::{interpreter_library, target_dir, thunder_binary};

fn has_driver() -> bool {
    match thunder_core::cuda::device_count() {
        Ok(n) => {
            eprintln!("this machine has {n} CUDA device(s): the no-driver checks do not apply");
            true
        }
        Err(_) => false,
    }
}

fn cuda_fuser_config() -> thunder_core::host::Config {
    let lib = target_dir().join(format!(
        "{}thunder_cuda_fuser{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        lib.exists(),
        "{} is missing: build the workspace first",
        lib.display()
    );
    let text = format!(
        "[[executor]]\nname = \"cuda-fuser\"\nlibrary = \"{}\"\npriority = 30\nrequires = \"^0.1\"\n",
        lib.display()
    );
    thunder_core::host::Config::parse(&text, std::path::Path::new("<test>")).expect("config")
}

#[test]
fn cuda_fuser_loads_and_reports_itself_unavailable() {
    if has_driver() {
        return;
    }
    let host = thunder_core::PluginHost::load(&cuda_fuser_config(), &[]);
    assert!(host.issues().is_empty(), "{:?}", host.issues());
    let e = &host.entries()[0];
    assert_eq!(e.name, "cuda-fuser");
    assert_eq!(e.devices, vec!["cuda".to_string()]);
    let reason = e.available.as_ref().expect_err("no driver here");
    assert!(reason.contains("no CUDA driver"), "{reason}");
    assert!(
        !e.is_active(),
        "an unavailable executor is never asked to claim"
    );
}

#[test]
fn device_arrays_say_no_cuda_driver() {
    if has_driver() {
        return;
    }
    let x = Array::from_slice(&[1.0f32, 2.0], &[2]).expect("array");
    let err = x.to(Device::Cuda(0)).expect_err("no driver here");
    assert!(
        matches!(err, thunder_core::Error::NoCudaDriver { .. }),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("no CUDA driver"), "{err}");
    // Staying on the CPU needs no driver at all.
    assert_eq!(
        x.to(Device::Cpu)
            .expect("cpu")
            .to_vec::<f32>()
            .expect("read"),
        [1.0, 2.0]
    );
}

#[test]
fn run_with_device_cuda_fails_cleanly_and_cpu_works() {
    if has_driver() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let program = dir.path().join("p.trace");
    std::fs::write(
        &program,
        "def computation(x):\n  # x: \"cpu f32[4]\"\n  t0 = ltorch.exp(x)\n  return (t0,)\n",
    )
    .expect("write");
    let config = dir.path().join("plugins.toml");
    std::fs::write(
        &config,
        format!(
            "[[executor]]\nname = \"interpreter\"\nlibrary = \"{}\"\n",
            interpreter_library().display()
        ),
    )
    .expect("write config");
    let run = |device: &str| {
        Command::new(thunder_binary())
            .env_remove("THUNDER_CONFIG")
            .env_remove("THUNDER_EXECUTORS")
            .arg("--config")
            .arg(&config)
            .arg("run")
            .arg(&program)
            .args(["-i", "x=ones:f32[4]", "--device", device, "--out"])
            .arg(dir.path())
            .output()
            .expect("thunder runs")
    };
    let out = run("cuda:0");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--device cuda:0") && stderr.contains("no CUDA driver"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let out = run("cpu");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = run("tpu:1");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("`tpu:1` is not a device"));
}
