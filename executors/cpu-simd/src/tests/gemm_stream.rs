//! The streaming GEMM kernel (`gemm_stream.rs`) against a plain sum, exactly: the operands are
//! small integers, so every order of summation gives the same f32. Shapes cover a ragged
//! last column block, row counts that are not multiples of the register tile, depths across
//! the depth blocks, an accumulated output, a right operand inside a wider matrix at an
//! unaligned address, and a transposed left operand.

use crate::gemm_run::View;
use crate::gemm_stream::{applies, gemm};

fn ints(n: usize, seed: u64) -> Vec<f32> {
    super::data(n, seed)
        .iter()
        .map(|x| (x * 4.0).round())
        .collect()
}

#[test]
fn streamed_products_are_exact() {
    if !applies(8, 64, 64, 1) {
        // The kernel is AVX-512 only; elsewhere every product goes to the `gemm` crate.
        assert!(crate::exec::isa_level() < 2);
        return;
    }
    assert!(!applies(8, 63, 64, 1), "narrower than a column block");
    assert!(!applies(8, 64, 64, 2), "strided right-operand rows");
    for (case, &(m, n, k, read_dst, a_transposed)) in [
        (1usize, 64usize, 64usize, false, false),
        (5, 65, 600, false, false),
        (6, 128, 512, true, false),
        (7, 200, 1100, false, true),
        (13, 64, 513, true, true),
        (128, 300, 768, false, false),
    ]
    .iter()
    .enumerate()
    {
        let seed = 10 * case as u64;
        let a = ints(m * k, seed + 1);
        // `b` sits 3 floats into its buffer (not 64-byte aligned), rows `n + 5` apart.
        let (off, b_rs) = (3usize, n + 5);
        let b = ints(off + k * b_rs, seed + 2);
        let init = ints(m * n, seed + 3);
        let mut dst = init.clone();
        let lhs = if a_transposed {
            View {
                ptr: a.as_ptr(),
                rs: 1,
                cs: m as isize,
            }
        } else {
            View {
                ptr: a.as_ptr(),
                rs: k as isize,
                cs: 1,
            }
        };
        // SAFETY: the views address elements inside their vectors; `applies` said yes.
        unsafe {
            gemm(
                (m, n, k),
                lhs,
                b.as_ptr().add(off),
                b_rs as isize,
                dst.as_mut_ptr(),
                n as isize,
                read_dst,
            )
        };
        for i in 0..m {
            for j in 0..n {
                let mut want = if read_dst {
                    init[i * n + j] as f64
                } else {
                    0.0
                };
                for p in 0..k {
                    let x = if a_transposed {
                        a[p * m + i]
                    } else {
                        a[i * k + p]
                    };
                    want += x as f64 * b[off + p * b_rs + j] as f64;
                }
                assert_eq!(
                    dst[i * n + j] as f64,
                    want,
                    "m {m} n {n} k {k} read_dst {read_dst}: ({i}, {j})"
                );
            }
        }
    }
}

#[test]
fn only_right_operands_beyond_an_l2_stream() {
    use crate::gemm_stream::pays;
    // The GPT-2 block's (`thunder bench`) right operands: in cache, the crate's kernels.
    for (k, n) in [(256, 1024), (1024, 256), (256, 768), (768, 256), (128, 128)] {
        assert!(!pays(n, k), "{k} x {n}");
    }
    // GPT-2 small's weights over a short batch: read from memory, streamed.
    for (k, n) in [
        (768, 768),
        (768, 2304),
        (768, 3072),
        (3072, 768),
        (768, 50257),
    ] {
        assert!(pays(n, k), "{k} x {n}");
    }
    assert!(
        pays(usize::MAX, 2),
        "sizes that overflow saturate instead of wrapping to small"
    );
}
