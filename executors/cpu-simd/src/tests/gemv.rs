//! One-row products (`gemv.rs`) against a plain sum, exactly: the operands are small
//! integers, so every order of summation gives the same f32. Both layouts of the right
//! operand, depths and widths around the vector and unroll widths (empty included), a strided
//! row, an accumulated output, and the threaded path of a classifier-sized product.

use crate::gemm_run::{Product, View};
use crate::gemv::{gemv, takes};

fn ints(n: usize, seed: u64) -> Vec<f32> {
    super::data(n, seed)
        .iter()
        .map(|x| (x * 4.0).round())
        .collect()
}

/// `a` (row `k`, elements `a_cs` apart) times `b` (`k x n`, columns contiguous when
/// `cols_contiguous`, inside a wider buffer), added to a start value when `read_dst`.
fn check(k: usize, n: usize, cols_contiguous: bool, a_cs: usize, read_dst: bool, threaded: bool) {
    let what = format!("k {k} n {n} cols {cols_contiguous} a_cs {a_cs} read {read_dst}");
    let a = ints(k * a_cs, 1 + k as u64);
    // Rows (or columns) 3 floats longer than they need, 5 floats into the buffer.
    let (off, ld) = (5, if cols_contiguous { k + 3 } else { n + 3 });
    let b = ints(off + ld * if cols_contiguous { n } else { k }, 7 + n as u64);
    let bv = View {
        ptr: b[off..].as_ptr(),
        rs: if cols_contiguous { 1 } else { ld as isize },
        cs: if cols_contiguous { ld as isize } else { 1 },
    };
    // AVX2 CPUs take both layouts; AVX-512 CPUs the columns-contiguous one unless
    // THUNDER_CPU_SIMD_GEMV=1 brings both (=0: neither).
    let wanted = match std::env::var("THUNDER_CPU_SIMD_GEMV").as_deref() {
        Ok("0") => false,
        Ok("1") => crate::exec::isa_level() >= 1,
        _ => match crate::exec::isa_level() {
            0 => false,
            1 => true,
            _ => cols_contiguous,
        },
    };
    assert_eq!(takes(1, &bv), wanted, "{what}");
    let start = ints(n + 1, 3);
    let mut dst = start.clone();
    let av = View {
        ptr: a.as_ptr(),
        rs: 0,
        cs: a_cs as isize,
    };
    if threaded {
        let product = Product {
            m: 1,
            n,
            k,
            a: av,
            b: bv,
            dst: dst.as_mut_ptr(),
            ld: n as isize,
            read_dst,
            packed: None,
        };
        // SAFETY: the views address a 1 x k row and a k x n matrix; dst holds n + 1 floats.
        unsafe { product.run(None) };
    } else {
        // SAFETY: as above.
        unsafe { gemv((n, k), av, bv, dst.as_mut_ptr(), read_dst) };
    }
    for j in 0..n {
        let mut want = if read_dst { start[j] as f64 } else { 0.0 };
        for p in 0..k {
            let bij = if cols_contiguous {
                b[off + j * ld + p]
            } else {
                b[off + p * ld + j]
            };
            want += a[p * a_cs] as f64 * bij as f64;
        }
        assert_eq!(dst[j] as f64, want, "{what}: output {j}");
    }
    assert_eq!(dst[n], start[n], "{what}: past the output");
}

#[test]
fn one_row_products_are_exact() {
    // The kernel itself runs on any CPU with AVX2 and FMA (AVX-512 ones included, where
    // `takes` leaves the rows-contiguous layout elsewhere).
    if crate::exec::isa_level() < 1 {
        eprintln!("gemv needs AVX2 and FMA; skipped");
        return;
    }
    assert!(
        !takes(
            2,
            &View {
                ptr: std::ptr::null(),
                rs: 1,
                cs: 64
            }
        ),
        "two rows"
    );
    assert!(
        !takes(
            1,
            &View {
                ptr: std::ptr::null(),
                rs: 2,
                cs: 64
            }
        ),
        "no contiguous side"
    );
    for k in [0, 1, 3, 8, 15, 16, 17, 33, 100] {
        for n in [0, 1, 3, 4, 5, 8, 9, 17, 40] {
            for cols_contiguous in [true, false] {
                for (a_cs, read_dst) in [(1, false), (1, true), (3, false)] {
                    check(k, n, cols_contiguous, a_cs, read_dst, false);
                }
            }
        }
    }
}

#[test]
fn a_classifier_sized_product_is_exact_through_product_run() {
    if crate::exec::isa_level() != 1 {
        eprintln!("gemv runs on AVX2 CPUs without AVX-512; skipped");
        return;
    }
    // ResNet-50's classifier, both layouts, through the entry that splits it over threads.
    for cols_contiguous in [true, false] {
        check(2048, 1000, cols_contiguous, 1, false, true);
        check(2048, 1000, cols_contiguous, 1, true, true);
    }
}
