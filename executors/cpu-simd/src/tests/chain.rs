//! Groups that run as register-resident chains (`chain.rs`): a bias row and a per-row scale
//! read from memory inside the chain, and tanh, sqrt and reciprocal steps, on row lengths and
//! sizes with partial blocks, threads and streaming stores. Exact ops are checked bit for bit
//! against f32 arithmetic, tanh within `math.rs`'s 5 ulp of the correctly rounded result.
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
    for n in [1usize, 63, 65, 4097, 300_007, (1 << 20) + 9] {
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
        for (i, &v) in dx.iter().enumerate() {
            let a = v * 3.0 + 0.5;
            let u = ulp_distance(got[0][i], f64::from(a).tanh() as f32);
            assert!(u <= 5, "n {n}: tanh({a}) = {} ({u} ulp)", got[0][i]);
            let re = 1.0 / got[0][i].abs().sqrt();
            assert_eq!(
                got[1][i].to_bits(),
                re.to_bits(),
                "n {n}: reciprocal at {i}"
            );
        }
    }
}
