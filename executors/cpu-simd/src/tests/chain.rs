//! Groups that run as register-resident chains (`chain.rs`): a bias row and a per-row scale
//! read from memory inside the chain, and tanh, sqrt and reciprocal steps, on row lengths and
//! sizes with partial blocks, threads and streaming stores. Exact ops are checked bit for bit
//! against f32 arithmetic, tanh within `math.rs`'s bound of the correctly rounded result.
//! The CI runs these under each `THUNDER_CPU_SIMD_ISA` (AVX-512, AVX2, and the tile path).

use super::math::ulp_distance;
use super::{data, ints, Tb};
use thunder_abi::{ArgView, DTypeCode::F32};

fn val(v: u32) -> ArgView {
    ArgView::Value(v)
}

#[test]
fn bias_row_and_row_scale_are_exact() {
    for (r, c) in [(37i64, 384i64), (3, 1000), (1, 129), (300, 513)] {
        let mut t = Tb::default();
        let x = t.value(F32, &[r, c]);
        let b = t.value(F32, &[c]);
        let s = t.value(F32, &[r]);
        let bb = t.op(
            "broadcast_in_dim",
            vec![val(b), ints(&[r, c]), ints(&[1])],
            F32,
            &[r, c],
        );
        let sb = t.op(
            "broadcast_in_dim",
            vec![val(s), ints(&[r, c]), ints(&[0])],
            F32,
            &[r, c],
        );
        let y = t.op("add", vec![val(x), val(bb)], F32, &[r, c]);
        let z = t.op("sub", vec![val(bb), val(y)], F32, &[r, c]);
        let w = t.op("mul", vec![val(z), val(sb)], F32, &[r, c]);
        let q = t.op("div", vec![val(sb), val(w)], F32, &[r, c]);
        let (n, cu) = ((r * c) as usize, c as usize);
        let (dx, db, ds) = (data(n, 21), data(cu, 22), data(r as usize, 23));
        let got = t.run(
            &[(x, dx.clone()), (b, db.clone()), (s, ds.clone())],
            &[y, q],
        );
        for (i, &v) in dx.iter().enumerate() {
            let (bv, sv) = (db[i % cu], ds[i / cu]);
            let y = v + bv;
            let q = sv / ((bv - y) * sv);
            assert_eq!(got[0][i].to_bits(), y.to_bits(), "[{r}, {c}] y at {i}");
            assert_eq!(got[1][i].to_bits(), q.to_bits(), "[{r}, {c}] q at {i}");
        }
    }
}

#[test]
fn tanh_sqrt_reciprocal_chain() {
    for n in [1usize, 63, 65, 128, 200, 4097, 300_007, (1 << 20) + 9] {
        let mut t = Tb::default();
        let sh = [n as i64];
        let x = t.value(F32, &sh);
        let m = t.op("mul", vec![val(x), ArgView::Float(3.0)], F32, &sh);
        let a = t.op("add", vec![val(m), ArgView::Float(0.5)], F32, &sh);
        let h = t.op("tanh", vec![val(a)], F32, &sh);
        let ab = t.op("abs", vec![val(h)], F32, &sh);
        let sq = t.op("sqrt", vec![val(ab)], F32, &sh);
        let re = t.op("reciprocal", vec![val(sq)], F32, &sh);
        let dx = data(n, 24);
        let got = t.run(&[(x, dx.clone())], &[h, re]);
        // `math::tanh`'s bounds: 5 ulp with fused multiply-adds, 7 on the scalar path.
        let bound = if crate::exec::isa_level() >= 1 { 5 } else { 6 };
        for (i, &v) in dx.iter().enumerate() {
            let a = v * 3.0 + 0.5;
            let u = ulp_distance(got[0][i], f64::from(a).tanh() as f32);
            assert!(u <= bound, "n {n}: tanh({a}) = {} ({u} ulp)", got[0][i]);
            let re = 1.0 / got[0][i].abs().sqrt();
            assert_eq!(
                got[1][i].to_bits(),
                re.to_bits(),
                "n {n}: reciprocal at {i}"
            );
        }
    }
}

/// A chain of literal, squaring, sign and root steps only: on AVX2 it is compiled on its own
/// (`Chain::light`), so this checks that path bit for bit, with partial blocks and threads.
#[test]
fn light_chain_is_exact() {
    for n in [1usize, 63, 64, 65, 129, 4097, 300_007] {
        let mut t = Tb::default();
        let sh = [n as i64];
        let x = t.value(F32, &sh);
        let m = t.op("mul", vec![val(x), ArgView::Float(1.5)], F32, &sh);
        let a = t.op("sub", vec![ArgView::Float(0.25), val(m)], F32, &sh);
        let q = t.op("mul", vec![val(a), val(a)], F32, &sh);
        let g = t.op("neg", vec![val(q)], F32, &sh);
        let ab = t.op("abs", vec![val(g)], F32, &sh);
        let sq = t.op("sqrt", vec![val(ab)], F32, &sh);
        let re = t.op("reciprocal", vec![val(sq)], F32, &sh);
        let d = t.op("div", vec![val(re), ArgView::Float(3.0)], F32, &sh);
        let dx = data(n, 25);
        let got = t.run(&[(x, dx.clone())], &[a, d]);
        for (i, &v) in dx.iter().enumerate() {
            let a = 0.25 - v * 1.5;
            let d = (1.0 / (-(a * a)).abs().sqrt()) / 3.0;
            assert_eq!(got[0][i].to_bits(), a.to_bits(), "n {n}: a at {i}");
            assert_eq!(got[1][i].to_bits(), d.to_bits(), "n {n}: d at {i}");
        }
    }
}

/// GELU reads its input twice, so it is no chain: it runs as a program of the group's own
/// instructions (`chain::Chain::Prog`). BERT's erf form is checked bit for bit against the
/// same f32 operations with `math::erf` (the program's erf gives its bits on every ISA), and
/// against f64 erf; GPT-2's tanh form against f64 tanh with tanh's 5 ulp.
#[test]
fn gelu_programs() {
    use super::gelu_bench::{erf_gelu, tanh_gelu};
    let fma = crate::exec::isa_level() >= 1;
    let sqrt2 = std::f32::consts::SQRT_2;
    for (r, c) in [
        (37i64, 384i64),
        (3, 1000),
        (5, 200),
        (1, 1536),
        (300, 513),
        (64, 64),
    ] {
        let (n, cu) = ((r * c) as usize, c as usize);
        // Inputs in [-6, 6): erf's both cases and its saturation at 4 * sqrt(2).
        let dx: Vec<f32> = data(n, 31).iter().map(|v| v * 6.0).collect();
        let db = data(cu, 32);
        let mut t = Tb::default();
        let (ids, out) = erf_gelu(&mut t, r, c);
        let got = t.run(&[(ids[0], dx.clone()), (ids[1], db.clone())], &[out]);
        for (i, &v) in dx.iter().enumerate() {
            let y = v + db[i % cu];
            let d = y / sqrt2;
            let e = if fma {
                crate::math::erf::<true>(d)
            } else {
                crate::math::erf::<false>(d)
            };
            let want = y * (e + 1.0) * 0.5;
            assert_eq!(
                got[0][i].to_bits(),
                want.to_bits(),
                "[{r}, {c}] erf-GELU({y}) at {i}"
            );
            let exact = 0.5 * f64::from(y) * (1.0 + libm::erf(f64::from(d)));
            assert!(
                (f64::from(got[0][i]) - exact).abs() <= 5e-7 * f64::from(y.abs()) + 1e-30,
                "[{r}, {c}] erf-GELU({y}) = {}, want {exact}",
                got[0][i]
            );
        }
        let mut t = Tb::default();
        let (ids, out) = tanh_gelu(&mut t, r, c);
        let got = t.run(&[(ids[0], dx.clone()), (ids[1], db.clone())], &[out]);
        for (i, &v) in dx.iter().enumerate() {
            let y = v + db[i % cu];
            let z = (y + y * y * y * 0.044715) * 0.797_884_6;
            let th = f64::from(z).tanh();
            let exact = 0.5 * f64::from(y) * (1.0 + th);
            // tanh within 5 ulp (6e-7 of it), the other f32 roundings within a few 1e-7.
            let tol = 1e-6 * f64::from(y.abs()) + 1e-30;
            assert!(
                (f64::from(got[0][i]) - exact).abs() <= tol,
                "[{r}, {c}] tanh-GELU({y}) = {}, want {exact}",
                got[0][i]
            );
        }
    }
}
