//! The committed kernel packages and the binding of ops to them, on CPU: every package
//! validates, its PTX entry takes exactly the parameters the launcher will pass, and the
//! parameters and grids computed for sample shapes equal hand-computed ones.

use std::path::Path;
use thunder_abi::{OpView, TraceView};
use thunder_core::host::view::trace_view;
use thunder_torch::parse_trace;
use thunder_triton::bind::{self, Param, Plan};
use thunder_triton::package::{self, Package, ParamType};
use thunder_triton::{check_arch, BUNDLED_DIR};

fn bundled() -> Vec<Package> {
    let (good, bad) = package::load_dir(Path::new(BUNDLED_DIR));
    assert!(bad.is_empty(), "broken committed packages: {bad:#?}");
    good
}

fn named(pkgs: &[Package], name: &str) -> Package {
    pkgs.iter()
        .find(|p| p.name() == name)
        .cloned()
        .unwrap_or_else(|| panic!("no package {name}"))
}

fn view_of(text: &str) -> TraceView {
    let trace = parse_trace(text).expect("parses");
    trace_view(&trace, &trace.bsyms)
}

fn sdpa(
    dtype: &str,
    shape_q: &str,
    shape_k: &str,
    mask: &str,
    causal: &str,
    scale: &str,
) -> TraceView {
    view_of(&format!(
        "def computation(q, k, v):\n  # q: \"cuda:0 {dtype}[{shape_q}]\"\n  # k: \"cuda:0 {dtype}[{shape_k}]\"\n  # v: \"cuda:0 {dtype}[{shape_k}]\"\n  t0 = ltorch.scaled_dot_product_attention(q, k, v, {mask}, {causal}, {scale})\n  return (t0,)\n"
    ))
}

fn only_op(view: &TraceView) -> &OpView {
    assert_eq!(view.ops.len(), 1, "{:?}", view.ops);
    &view.ops[0]
}

fn plan_of(pkg: &Package, view: &TraceView) -> Result<Plan, String> {
    let op = only_op(view);
    let inputs: Vec<u32> = op.input_values().collect();
    bind::plan(pkg, view, op, &inputs, &op.outputs)
}

/// The shipped variants: every combination compile_kernels.py builds.
fn expected_names() -> Vec<String> {
    let mut names = Vec::new();
    for dt in ["f16", "bf16"] {
        for d in [64, 128] {
            for causal in ["", "_causal"] {
                for kind in ["sdpa_fwd", "sdpa_fwd_lse", "sdpa_bwd"] {
                    names.push(format!("{kind}_{dt}_d{d}{causal}"));
                }
            }
        }
    }
    for dt in ["f16", "bf16", "f32"] {
        names.push(format!("rms_norm_{dt}"));
    }
    names.sort();
    names
}

#[test]
fn every_committed_package_validates() {
    let pkgs = bundled();
    let mut names: Vec<String> = pkgs.iter().map(Package::name).collect();
    names.sort();
    assert_eq!(names, expected_names());
    for p in &pkgs {
        assert_eq!(p.arch(), 90, "{}", p.name());
        assert_eq!(
            p.pointer_align,
            16,
            "{}: compiled with 16-byte pointer hints",
            p.name()
        );
        for k in &p.launches {
            assert_eq!(k.meta.arch, 90, "{}", p.name());
            assert!(k.ptx.is_some(), "{}: ships its PTX", p.name());
            // The ELF header agrees (so the cubin/metadata cross-check is active for these).
            let elf = std::fs::read(&k.cubin).expect("cubin");
            assert_eq!(package::cubin_sm(&elf), Some(90), "{}", p.name());
        }
        assert_eq!(
            p.ptx_isa,
            Some((8, 8)),
            "{}: built with the CUDA 12 ptxas",
            p.name()
        );
        let name = p.name();
        let (expected_symbol, launches) = if name.starts_with("sdpa_fwd_lse") {
            ("ltorch.sdpa_fwd_lse", 1)
        } else if name.starts_with("sdpa_bwd") {
            ("ltorch.sdpa_bwd", 2)
        } else if name.starts_with("sdpa_fwd") {
            ("ltorch.scaled_dot_product_attention", 1)
        } else {
            ("ltorch.rms_norm", 1)
        };
        assert_eq!(p.symbol, expected_symbol);
        assert_eq!(p.launches.len(), launches, "{name}");
    }
    let total: u64 = walk_size(Path::new(BUNDLED_DIR));
    assert!(
        total < 4 << 20,
        "kernel packages take {total} bytes; keep them small"
    );
}

/// The attention cubins were compiled with Triton's 16-byte divisibility hints: their PTX moves
/// tiles with vector loads and cp.async, not 16-bit scalar loads (what they did without hints).
#[test]
fn attention_kernels_load_vectors() {
    for p in bundled().iter().filter(|p| p.name().starts_with("sdpa")) {
        for k in &p.launches {
            let ptx = std::fs::read_to_string(k.ptx.as_ref().expect("ptx")).expect("ptx");
            assert!(
                ptx.contains("ld.global.v4") || ptx.contains("cp.async.cg.shared.global"),
                "{}: {} has no vector loads",
                p.name(),
                k.kernel
            );
            assert!(
                !ptx.contains("ld.global.b16"),
                "{}: {} loads 16-bit scalars",
                p.name(),
                k.kernel
            );
        }
    }
}

fn walk_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("readable")
        .map(|e| {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk_size(&p)
            } else {
                p.metadata().expect("metadata").len()
            }
        })
        .sum()
}

/// Triton 3.9's launcher (`CudaLauncher` in backends/nvidia/driver.py) passes the kernel's
/// non-constexpr arguments, then a global scratch and a profile scratch pointer. The PTX entry
/// of every package must take exactly that many parameters, and the plan must end with the two
/// scratch pointers (null: the metadata sizes are 0).
#[test]
fn launcher_parameters_match_the_ptx_entry_and_metadata() {
    for p in bundled() {
        for k in &p.launches {
            let ptx = std::fs::read_to_string(k.ptx.as_ref().expect("ptx")).expect("ptx readable");
            let count = package::ptx_param_count(&ptx, &k.kernel).expect("entry present");
            assert_eq!(k.meta.trailing_params(), 2, "{}", p.name());
            assert_eq!(count, k.signature.len() + 2, "{}", p.name());
            assert_eq!(
                k.meta.global_scratch.map(|s| s.size),
                Some(0),
                "{}",
                p.name()
            );
            assert_eq!(
                k.meta.profile_scratch.map(|s| s.size),
                Some(0),
                "{}",
                p.name()
            );
            assert_eq!(k.meta.block(), 32 * k.meta.num_warps);
            // The signature's pointer dtypes agree with the manifest's dtypes, in PTX order.
            let ptrs = k
                .signature
                .iter()
                .filter(|t| matches!(t, ParamType::Ptr(_)))
                .count();
            let ptx_ptrs = ptx[ptx.find(".entry").expect("entry")..]
                .split(')')
                .next()
                .expect("params")
                .matches(".param .u64 .ptr")
                .count();
            assert_eq!(
                ptx_ptrs,
                ptrs + 2,
                "{}: pointer params incl. scratch",
                p.name()
            );
        }
    }
}

#[test]
fn attention_parameters_and_grid_for_b8_h12_t1024_d64() {
    let pkgs = bundled();
    let view = sdpa(
        "bf16",
        "8, 12, 1024, 64",
        "8, 12, 1024, 64",
        "None",
        "True",
        "None",
    );
    let p = named(&pkgs, "sdpa_fwd_bf16_d64_causal");
    let plan = plan_of(&p, &view).expect("covered");
    assert_eq!(plan.device, 0);
    assert_eq!(plan.pointer_align, 16);
    assert!(plan.scratch.is_empty());
    let plan = &plan.launches[0];
    assert_eq!(
        plan.params,
        vec![
            Param::Input(0),
            Param::Input(1),
            Param::Input(2),
            Param::Output(0),
            Param::F32(0.125), // 1/sqrt(64)
            Param::I32(1024),
            Param::I32(1024),
            Param::GlobalScratch { bytes: 0, align: 1 },
            Param::ProfileScratch { bytes: 0, align: 1 },
        ]
    );
    // cdiv(1024, BLOCK_M=128) query blocks, one per (batch, head).
    assert_eq!(plan.grid, [8, 96, 1]);
    assert_eq!(plan.block, 128);
    // BLOCK_N x D bf16 tiles of k and v, in 3 pipeline stages, plus q.
    assert_eq!(plan.shared, 65536);
    // The non-causal package refuses a causal op, and the other way round.
    let err = plan_err(&named(&pkgs, "sdpa_fwd_bf16_d64"), &view);
    assert!(err.contains("is_causal == false"), "{err}");
    // An explicit scale is passed through.
    let view = sdpa(
        "f16",
        "2, 4, 256, 128",
        "2, 4, 512, 128",
        "None",
        "False",
        "0.5",
    );
    let plan = plan_of(&named(&pkgs, "sdpa_fwd_f16_d128"), &view).expect("covered");
    let plan = &plan.launches[0];
    assert_eq!(
        plan.params[4..7],
        [Param::F32(0.5), Param::I32(256), Param::I32(512)]
    );
    assert_eq!(plan.grid, [2, 8, 1]);
    assert_eq!(plan.block, 256);
}

fn plan_err(p: &Package, view: &TraceView) -> String {
    plan_of(p, view).expect_err("not covered")
}

#[test]
fn attention_shapes_and_dtypes_outside_the_kernels_are_refused() {
    let pkgs = bundled();
    let p = named(&pkgs, "sdpa_fwd_bf16_d64");
    let cases = [
        (
            sdpa(
                "bf16",
                "1, 2, 1000, 64",
                "1, 2, 1000, 64",
                "None",
                "False",
                "None",
            ),
            "q.shape[2] % 128 == 0",
        ),
        (
            sdpa(
                "bf16",
                "1, 2, 128, 80",
                "1, 2, 128, 80",
                "None",
                "False",
                "None",
            ),
            "q.shape[3] == 64",
        ),
        (
            sdpa(
                "f16",
                "1, 2, 128, 64",
                "1, 2, 128, 64",
                "None",
                "False",
                "None",
            ),
            "`q` is f16, the kernel takes bf16",
        ),
        (
            sdpa("bf16", "2, 128, 64", "2, 128, 64", "None", "False", "None"),
            "q.rank == 4",
        ),
    ];
    for (view, want) in cases {
        let err = plan_err(&p, &view);
        assert!(err.contains(want), "{err} (wanted {want})");
    }
    // A mask is an extra tensor argument: the `attn_mask == none` constraint refuses it.
    let view = view_of("def computation(q, k, v, m):\n  # q: \"cuda:0 bf16[1, 2, 128, 64]\"\n  # k: \"cuda:0 bf16[1, 2, 128, 64]\"\n  # v: \"cuda:0 bf16[1, 2, 128, 64]\"\n  # m: \"cuda:0 b8[128, 128]\"\n  t0 = ltorch.scaled_dot_product_attention(q, k, v, m, False, None)\n  return (t0,)\n");
    let err = plan_err(&p, &view);
    assert!(err.contains("attn_mask == none"), "{err}");
    // CPU tensors are not the plugin's.
    let view = view_of("def computation(q, k, v):\n  # q: \"cpu bf16[1, 2, 128, 64]\"\n  # k: \"cpu bf16[1, 2, 128, 64]\"\n  # v: \"cpu bf16[1, 2, 128, 64]\"\n  t0 = ltorch.scaled_dot_product_attention(q, k, v, None, False, None)\n  return (t0,)\n");
    let err = plan_err(&p, &view);
    assert!(err.contains("not a CUDA tensor"), "{err}");
}

#[test]
fn rms_norm_parameters_and_grid() {
    let pkgs = bundled();
    let view = view_of("def computation(x, w):\n  # x: \"cuda:0 bf16[4, 8, 768]\"\n  # w: \"cuda:0 bf16[768]\"\n  t0 = ltorch.rms_norm(x, [768], w, None)\n  return (t0,)\n");
    let plan = plan_of(&named(&pkgs, "rms_norm_bf16"), &view).expect("covered");
    let plan = &plan.launches[0];
    assert_eq!(
        plan.params,
        vec![
            Param::Input(0),
            Param::Input(1),
            Param::Output(0),
            Param::I32(768),
            Param::F32(0.0078125), // bf16's machine epsilon, as the decomposition's default
            Param::GlobalScratch { bytes: 0, align: 1 },
            Param::ProfileScratch { bytes: 0, align: 1 },
        ]
    );
    assert_eq!(plan.grid, [32, 1, 1]); // 4 * 8 rows
    assert_eq!(plan.block, 128);
    // An explicit eps; f32.
    let view = view_of("def computation(x, w):\n  # x: \"cuda:0 f32[3, 100]\"\n  # w: \"cuda:0 f32[100]\"\n  t0 = ltorch.rms_norm(x, [100], w, 1e-05)\n  return (t0,)\n");
    let plan = plan_of(&named(&pkgs, "rms_norm_f32"), &view).expect("covered");
    let plan = &plan.launches[0];
    assert_eq!(plan.params[3..5], [Param::I32(100), Param::F32(1e-5)]);
    assert_eq!(plan.grid, [3, 1, 1]);
    // No weight, or a weight of another dtype, or a 2-D normalized_shape: decomposed instead.
    let p = named(&pkgs, "rms_norm_bf16");
    let view = view_of("def computation(x):\n  # x: \"cuda:0 bf16[4, 768]\"\n  t0 = ltorch.rms_norm(x, [768], None, None)\n  return (t0,)\n");
    let err = plan_err(&p, &view);
    assert!(err.contains("weight.rank == 1"), "{err}");
    let view = view_of("def computation(x, w):\n  # x: \"cuda:0 bf16[4, 768]\"\n  # w: \"cuda:0 f32[768]\"\n  t0 = ltorch.rms_norm(x, [768], w, None)\n  return (t0,)\n");
    let err = plan_err(&p, &view);
    assert!(
        err.contains("`weight` is f32, the kernel takes bf16"),
        "{err}"
    );
    let view = view_of("def computation(x, w):\n  # x: \"cuda:0 bf16[4, 6, 8]\"\n  # w: \"cuda:0 bf16[6, 8]\"\n  t0 = ltorch.rms_norm(x, [6, 8], w, None)\n  return (t0,)\n");
    let err = plan_err(&p, &view);
    assert!(err.contains("len(normalized_shape) == 1"), "{err}");
}

#[test]
fn scratch_is_sized_per_program_as_tritons_launcher_does() {
    let mut meta = bundled()[0].launches[0].meta.clone();
    meta.global_scratch = Some(package::Scratch {
        size: 256,
        align: 128,
    });
    meta.profile_scratch = Some(package::Scratch { size: 0, align: 1 });
    assert_eq!(
        bind::trailing(&meta, [8, 96, 1]),
        vec![
            Param::GlobalScratch {
                bytes: 256 * 8 * 96,
                align: 128
            },
            Param::ProfileScratch { bytes: 0, align: 1 },
        ]
    );
    // Metadata from a Triton without profile scratch: one trailing pointer.
    meta.profile_scratch = None;
    assert_eq!(bind::trailing(&meta, [2, 1, 1]).len(), 1);
}

#[test]
fn parameter_slots_hold_each_value_in_its_first_bytes() {
    let params = [
        Param::Input(0),
        Param::I32(-3),
        Param::F32(0.125),
        Param::I64(1 << 40),
        Param::GlobalScratch { bytes: 0, align: 1 },
    ];
    let slots = bind::param_slots(&params, &[0xdead_beef_0000, 0, 0, 0, 0]);
    assert_eq!(slots.len(), 5);
    assert_eq!(u64::from_ne_bytes(slots[0]), 0xdead_beef_0000);
    assert_eq!(i32::from_ne_bytes(slots[1][..4].try_into().expect("4")), -3);
    assert_eq!(
        f32::from_ne_bytes(slots[2][..4].try_into().expect("4")),
        0.125
    );
    assert_eq!(i64::from_ne_bytes(slots[3]), 1 << 40);
    assert_eq!(slots[4], [0; 8], "a zero-size scratch is a null pointer");
}

#[test]
fn arch_and_cuda_version_mismatches_are_explained() {
    let p = named(&bundled(), "rms_norm_f16");
    assert_eq!(
        check_arch(&p, 90, 12040),
        Ok(()),
        "a CUDA 12 driver loads a CUDA 12.9 cubin"
    );
    let err = check_arch(&p, 80, 12040).expect_err("sm_80");
    assert!(
        err.contains("built for sm_90 but the device is sm_80 (compute capability 8.0)"),
        "{err}"
    );
    assert!(err.contains("--arch 80"), "{err}");
    let err = check_arch(&p, 90, 11080).expect_err("CUDA 11 driver");
    assert!(
        err.contains("built with CUDA 12.9 (PTX ISA 8.8) but the driver supports CUDA 11.8"),
        "{err}"
    );
}
