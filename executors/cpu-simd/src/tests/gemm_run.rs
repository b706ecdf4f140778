//! The GEMM stage's panels (`gemm_run.rs`): edges, and panel-split and threaded products
//! against one single-threaded call.

use crate::gemm_run::{panel_edges, split_rows, Product, View};

#[test]
fn panel_edges_cover_the_range_on_aligned_inner_edges() {
    assert_eq!(panel_edges(2048, 2, 64), vec![0, 1024, 2048]);
    assert_eq!(panel_edges(256, 2, 24), vec![0, 120, 256]);
    assert_eq!(panel_edges(130, 4, 64), vec![0, 64, 128, 130]);
    // Too short for more than one aligned part.
    assert_eq!(panel_edges(10, 2, 64), vec![0, 10]);
    for (len, panels, align) in [(1000, 3, 24), (7, 2, 1), (64, 2, 64), (1, 8, 64)] {
        let e = panel_edges(len, panels, align);
        assert_eq!((e[0], e[e.len() - 1]), (0, len));
        assert!(e.windows(2).all(|w| w[0] < w[1]), "{e:?}");
        assert!(e[1..e.len() - 1].iter().all(|x| x % align == 0), "{e:?}");
    }
}

fn view(p: &[f32], rows: usize, cols: usize, transposed: bool) -> View<f32> {
    View {
        ptr: p.as_ptr(),
        rs: if transposed { 1 } else { cols as isize },
        cs: if transposed { rows as isize } else { 1 },
    }
}

/// Panel splits, and the threaded run, against one single-threaded call on strided and
/// transposed views (overwriting and accumulating). The operands are small integers, so
/// every order of summation gives the same result and the comparison is exact.
#[test]
fn panels_match_one_call() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .expect("a test pool");
    // All but the last are above the threading threshold (2^24 multiply-adds); the first
    // is cut into row panels, the others into column panels.
    for &(m, k, n, ta, tb) in &[
        (700, 200, 150, false, false),
        (300, 250, 240, false, true),
        (40, 800, 600, true, false),
        (256, 256, 288, true, true),
        (97, 33, 97, false, false),
    ] {
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
        let init: Vec<f32> = (0..m * n).map(|i| (i % 3) as f32).collect();
        for read_dst in [false, true] {
            let mut want = init.clone();
            let mut p = Product {
                m,
                n,
                k,
                a: view(&a, m, k, ta),
                b: view(&b, k, n, tb),
                dst: want.as_mut_ptr(),
                ld: n as isize,
                read_dst,
                packed: None,
            };
            // SAFETY: the views and outputs are the vectors above, sized m*k, k*n and m*n.
            unsafe { p.run_serial() };
            for panels in [2, 3] {
                let mut got = init.clone();
                p.dst = got.as_mut_ptr();
                let rows = split_rows(&p.a, &p.b, (m, k, n));
                assert_eq!(rows, m == 700, "m {m} k {k} n {n}: the split");
                let len = if rows { m } else { n };
                for w in panel_edges(len, panels, 8).windows(2) {
                    let part = if rows {
                        p.rows(w[0], w[1])
                    } else {
                        p.cols(w[0], w[1])
                    };
                    // SAFETY: as above; panels are disjoint.
                    unsafe { part.run_serial() };
                }
                assert_eq!(want, got, "m {m} k {k} n {n} panels {panels}");
            }
            let mut got = init.clone();
            p.dst = got.as_mut_ptr();
            // SAFETY: as above.
            pool.install(|| unsafe { p.run(None) });
            assert_eq!(want, got, "m {m} k {k} n {n} threaded, read_dst {read_dst}");
        }
    }
}

/// Products of the team's range (2^18 to 2^24 multiply-adds), run from a thread outside rayon
/// as a region runs, against one single-threaded call: row panels, and column panels when the
/// rows are too few, overwriting and accumulating. Small integer
/// operands make every order of summation exact.
#[test]
fn team_panels_match_one_call() {
    for &(m, k, n, ta, tb) in &[
        (256, 128, 128, false, true),
        (256, 64, 128, false, false),
        (128, 256, 128, true, false),
        (250, 70, 90, false, false),
        // Too few rows for two row panels: column panels.
        (40, 256, 256, false, true),
    ] {
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
        let init: Vec<f32> = (0..m * n).map(|i| (i % 3) as f32).collect();
        for read_dst in [false, true] {
            let mut want = init.clone();
            let mut p = Product {
                m,
                n,
                k,
                a: view(&a, m, k, ta),
                b: view(&b, k, n, tb),
                dst: want.as_mut_ptr(),
                ld: n as isize,
                read_dst,
                packed: None,
            };
            // SAFETY: the views and outputs are the vectors above, sized m*k, k*n and m*n.
            unsafe { p.run_serial() };
            for round in 0..3 {
                let mut got = init.clone();
                p.dst = got.as_mut_ptr();
                // SAFETY: as above.
                unsafe { p.run(None) };
                assert_eq!(
                    want, got,
                    "m {m} k {k} n {n} read_dst {read_dst} round {round}"
                );
            }
        }
    }
}

/// The GPT-2 block's twelve products (`thunder bench`'s `gpt2_block`, with the operand
/// layouts its trace shows) on one thread, threaded from the calling thread, and threaded
/// inside a region on a worker (`on_worker::run`), rounds alternating; GFLOP/s medians.
/// Ignored by default: `RAYON_NUM_THREADS=2 cargo test --release -p thunder-cpu-simd
/// block_gemm_bench -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: run it by name with --ignored --nocapture"]
fn block_gemm_bench() {
    // (m, k, n, a transposed, b transposed)
    let shapes = [
        (256, 256, 1024, false, true),
        (256, 1024, 256, false, true),
        (1024, 256, 256, true, false),
        (256, 256, 1024, false, false),
        (256, 1024, 256, false, false),
        (256, 256, 768, false, true),
        (768, 256, 256, true, false),
        (256, 768, 256, false, false),
        (256, 256, 256, false, false),
    ];
    for &(m, k, n, ta, tb) in &shapes {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 * 0.1).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.1).collect();
        let mut c = vec![0f32; m * n];
        let p = Product {
            m,
            n,
            k,
            a: view(&a, m, k, ta),
            b: view(&b, k, n, tb),
            dst: c.as_mut_ptr(),
            ld: n as isize,
            read_dst: false,
            packed: None,
        };
        let reps = (2e9 / (2 * m * n * k) as f64).ceil() as usize;
        let time = |f: &dyn Fn()| {
            let t = std::time::Instant::now();
            for _ in 0..reps {
                f();
            }
            (2 * m * n * k * reps) as f64 / t.elapsed().as_secs_f64() / 1e9
        };
        // SAFETY (each closure): the views and output are the vectors above.
        let serial = || unsafe { p.run_serial() };
        let threaded = || unsafe { p.run(None) };
        let mut rates = [vec![], vec![], vec![]];
        for _ in 0..7 {
            rates[0].push(time(&serial));
            rates[1].push(time(&threaded));
            rates[2].push(crate::on_worker::run(|| time(&threaded)));
        }
        for r in &mut rates {
            r.sort_by(f64::total_cmp);
        }
        eprintln!(
            "{m}x{k}x{n}{}{}: one thread {:6.1}, threaded {:6.1}, on a worker {:6.1} GFLOP/s",
            if ta { " a^T" } else { "" },
            if tb { " b^T" } else { "" },
            rates[0][3],
            rates[1][3],
            rates[2][3]
        );
    }
}
