//! The attention's AVX-512 pieces (`attn_tile.rs`) on their own: the key-block copy against
//! an element-by-element copy (head dims and key counts off the 16 x 16 blocks, and a view
//! that is not contiguous along the head dim), and the register-tile product against a plain
//! sum, exactly: the operands are small integers, so every order of summation gives the same
//! f32. `tests/attn.rs` checks the whole kernel, softmax included, against an f64 reference.

use crate::attn_tile::{pack, product, Strided};

fn ints(n: usize, seed: u64) -> Vec<f32> {
    super::data(n, seed)
        .iter()
        .map(|x| (x * 4.0).round())
        .collect()
}

/// The kernels need AVX-512F; elsewhere the attention runs on the `gemm` crate.
fn avx512() -> bool {
    let has = is_x86_feature_detected!("avx512f");
    if !has {
        eprintln!("no AVX-512F on this CPU: the tile kernels are not used here");
    }
    has
}

#[test]
fn packed_key_blocks_are_the_transposed_view() {
    if !avx512() {
        return;
    }
    // (head dim, keys, key stride, head-dim stride)
    for &(d, cols, cs, rs) in &[
        (32usize, 128usize, 384isize, 1isize),
        (64, 128, 64, 1),
        (35, 37, 40, 1),
        (16, 16, 16, 1),
        (3, 5, 7, 1),
        (8, 20, 1, 20),
        (17, 33, 2, 70),
    ] {
        let ld = cols + 3;
        let src = ints(
            cols * cs as usize + d * rs as usize + 1,
            d as u64 * 31 + cols as u64,
        );
        let kt = Strided {
            p: src.as_ptr(),
            rs,
            cs,
        };
        let mut got = vec![f32::NAN; d * ld];
        // SAFETY: the view addresses elements inside `src`; AVX-512F is present.
        unsafe { pack(kt, d, cols, &mut got, ld) };
        for p in 0..d {
            for j in 0..cols {
                let want = src[j * cs as usize + p * rs as usize];
                assert_eq!(got[p * ld + j], want, "d {d} cols {cols}: ({p}, {j})");
            }
        }
    }
}

#[test]
fn tile_products_are_exact() {
    if !avx512() {
        return;
    }
    // (m, n, k, accumulate, left operand transposed)
    for (case, &(m, n, k, add, a_t)) in [
        (128usize, 128usize, 32usize, false, false),
        (128, 32, 128, true, false),
        (13, 37, 5, false, true),
        (1, 1, 1, true, false),
        (25, 150, 9, false, false),
        (7, 64, 200, true, true),
        (12, 17, 3, false, false),
        // Depths over several blocks, written and accumulated.
        (5, 70, 600, false, false),
        (9, 33, 513, true, true),
    ]
    .iter()
    .enumerate()
    {
        let seed = 10 * case as u64;
        let a = ints(m * k, seed + 1);
        // `b`'s rows are `n + 5` apart, 3 floats into the buffer.
        let (off, b_rs) = (3usize, n + 5);
        let b = ints(off + k * b_rs, seed + 2);
        let ld = n + 2;
        let init = ints(m * ld, seed + 3);
        let mut out = init.clone();
        let lhs = if a_t {
            Strided {
                p: a.as_ptr(),
                rs: 1,
                cs: m as isize,
            }
        } else {
            Strided {
                p: a.as_ptr(),
                rs: k as isize,
                cs: 1,
            }
        };
        // SAFETY: every view addresses elements inside its vector; AVX-512F is present.
        unsafe {
            product(
                (m, n, k),
                lhs,
                b.as_ptr().add(off),
                b_rs as isize,
                out.as_mut_ptr(),
                ld as isize,
                add,
            )
        };
        for i in 0..m {
            for j in 0..ld {
                let mut want = if add || j >= n {
                    init[i * ld + j] as f64
                } else {
                    0.0
                };
                if j < n {
                    for p in 0..k {
                        let x = if a_t { a[p * m + i] } else { a[i * k + p] };
                        want += x as f64 * b[off + p * b_rs + j] as f64;
                    }
                }
                assert_eq!(
                    out[i * ld + j] as f64,
                    want,
                    "m {m} n {n} k {k} add {add}: ({i}, {j})"
                );
            }
        }
    }
}
