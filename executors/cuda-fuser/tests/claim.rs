//! What the fuser claims: exit reshapes (a reshape of a run's value that only ops outside the
//! run read) become regions of their own, chains of them included; a reshape read inside the
//! run, or of a value the run does not compute, stays in the run.

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
