//! What the fuser claims: exit reshapes (a reshape that only ops outside the run read, of a
//! run's value or not) become regions of their own, chains of them included; a reshape read
//! inside the run stays in it.

mod common;

use thunder_cuda_fuser::{claim, support};

const PROGRAM: &str = r#"def computation(x, w):
  # x: "cuda:0 f32[4, 6]"
  # w: "cuda:0 f32[6, 3]"
  t0 = prims.reshape(x, [24])
  t1 = prims.exp(t0)
  t2 = prims.reshape(t1, [4, 6])
  t3 = prims.neg(t2)
  t4 = prims.reshape(t3, [2, 12])
  t5 = prims.reshape(t4, [4, 6])
  t6 = prims.matmul(t5, w)
  return (t6, t2)
"#;

#[test]
fn exit_reshapes_and_their_chains_are_regions_of_their_own() {
    let view = common::view_of(PROGRAM);
    let runs = claim::runs(&view, |op| support::accepts(&view, op));
    let symbols = |r: &Vec<u32>| -> Vec<String> {
        r.iter()
            .map(|&i| view.ops[i as usize].symbol.to_string())
            .collect()
    };
    // t0 reshapes an input (stays), t2 is read by t3 in the run (stays, though returned too),
    // t4 and t5 only hand t3's value to the GEMM: each its own region.
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert_eq!(
        symbols(&runs[0]),
        ["prims.reshape", "prims.exp", "prims.reshape", "prims.neg"]
    );
    assert_eq!(runs[1], [4]);
    assert_eq!(runs[2], [5]);
}

/// The seed of a backward and the saved logits reshaped for the loss gradient: two unrelated
/// ops in one run. The reshape's result leaves the run unread by it, so it is a region of its
/// own (an alias at run time), not a copy inside the seed's kernel.
const SEED_AND_LOGITS: &str = r#"def computation(logits, w):
  # logits: "cuda:0 bf16[6, 5]"
  # w: "cuda:0 bf16[5, 4]"
  t0 = prims.full([], 1.0, devices.cuda0, dtypes.f32)
  t1 = prims.reshape(logits, [2, 3, 5])
  t2 = prims.reshape(t1, [6, 5])
  t3 = prims.matmul(t2, w)
  return (t3, t0)
"#;

#[test]
fn a_reshape_of_an_input_that_only_leaves_the_run_is_a_region_of_its_own() {
    let view = common::view_of(SEED_AND_LOGITS);
    let runs = claim::runs(&view, |op| support::accepts(&view, op));
    assert!(runs.contains(&vec![0]), "the seed alone: {runs:?}");
    assert!(
        !runs
            .iter()
            .any(|r| r.len() > 1 && (r.contains(&1) || r.contains(&2))),
        "no reshape shares a region: {runs:?}"
    );
}
