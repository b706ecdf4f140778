//! Programs compiled ahead of time (`chain_aot.rs`): the matcher, on the GPT-2 block's GELU
//! backward as its trace orders it and as a hand-built trace orders it, and on near misses;
//! and that group's results, bit for bit against the same f32 operations (the bias gradient
//! within an ulp of its f64 sum), on row lengths with partial blocks and threads. The CI runs
//! these under each `THUNDER_CPU_SIMD_ISA`, so the kernel, the program and the tile path all
//! meet the same reference.

use super::gelu_bench::gelu_backward;
use super::math::ulp_distance;
use super::{data, Tb};
use crate::chain::{Arith, Un, Val, Vi};
use crate::chain_aot::{find, Kernel};

fn ld(dst: u8, acc: usize) -> Vi {
    Vi::Load {
        dst,
        acc,
        splat: false,
    }
}

fn bin(op: Arith, dst: u8, a: Val, b: Val) -> Vi {
    Vi::Binary { op, dst, a, b }
}

fn r(x: u8) -> Val {
    Val::Reg(x)
}

fn c(x: f32) -> Val {
    Val::Lit(x)
}

/// The GELU backward as the GPT-2 block's trace gives it (`THUNDER_CPU_SIMD_TRACE=1`), with
/// its accesses numbered from `base`.
fn block_program(base: usize) -> Vec<Vi> {
    use Arith::{Add, Mul, Sub};
    let (cube, scale) = (0.044715, 0.797_884_6);
    vec![
        ld(0, base),
        ld(1, base + 1),
        bin(Add, 2, r(0), r(1)),
        bin(Mul, 1, r(2), r(2)),
        bin(Mul, 0, r(1), r(2)),
        bin(Mul, 3, r(0), c(cube)),
        bin(Add, 0, r(2), r(3)),
        bin(Mul, 3, r(0), c(scale)),
        Vi::Unary {
            op: Un::Tanh,
            dst: 0,
            a: 3,
        },
        bin(Add, 3, r(0), c(1.0)),
        ld(4, base + 2),
        bin(Mul, 5, r(4), r(3)),
        bin(Mul, 6, r(2), c(0.5)),
        bin(Mul, 7, r(4), r(6)),
        bin(Mul, 4, r(5), c(0.5)),
        bin(Mul, 5, r(0), r(0)),
        bin(Sub, 0, c(1.0), r(5)),
        bin(Mul, 5, r(7), r(0)),
        bin(Mul, 0, r(5), c(scale)),
        bin(Add, 5, r(4), r(0)),
        bin(Mul, 4, r(0), c(cube)),
        bin(Mul, 0, r(4), r(2)),
        bin(Mul, 7, r(4), r(1)),
        bin(Add, 1, r(5), r(7)),
        bin(Mul, 7, r(0), r(2)),
        bin(Add, 2, r(1), r(7)),
        bin(Add, 1, r(2), r(7)),
        Vi::Sum { src: 1, red: 0 },
        bin(Mul, 7, r(6), r(3)),
        Vi::Store {
            src: 7,
            acc: base + 3,
        },
        Vi::Store {
            src: 1,
            acc: base + 4,
        },
    ]
}

/// The same values in the order the hand-built trace of `gelu_bench` gives them: `h` first,
/// the gradient's loads later, registers allocated differently.
fn hand_built_program() -> Vec<Vi> {
    use Arith::{Add, Mul, Sub};
    let (cube, scale) = (0.044715, 0.797_884_6);
    vec![
        ld(0, 0),
        ld(1, 1),
        bin(Add, 2, r(0), r(1)),
        bin(Mul, 1, r(2), r(2)),
        bin(Mul, 0, r(1), r(2)),
        bin(Mul, 3, r(0), c(cube)),
        bin(Add, 0, r(2), r(3)),
        bin(Mul, 3, r(0), c(scale)),
        Vi::Unary {
            op: Un::Tanh,
            dst: 0,
            a: 3,
        },
        bin(Add, 3, r(0), c(1.0)),
        bin(Mul, 4, r(2), c(0.5)),
        bin(Mul, 5, r(4), r(3)),
        ld(6, 2),
        bin(Mul, 7, r(6), r(3)),
        bin(Mul, 3, r(6), r(4)),
        bin(Mul, 4, r(7), c(0.5)),
        bin(Mul, 7, r(0), r(0)),
        bin(Sub, 0, c(1.0), r(7)),
        bin(Mul, 7, r(3), r(0)),
        bin(Mul, 0, r(7), c(scale)),
        bin(Add, 7, r(4), r(0)),
        bin(Mul, 4, r(0), c(cube)),
        bin(Mul, 0, r(4), r(2)),
        bin(Mul, 3, r(4), r(1)),
        bin(Add, 1, r(7), r(3)),
        bin(Mul, 3, r(0), r(2)),
        bin(Add, 2, r(1), r(3)),
        bin(Add, 1, r(2), r(3)),
        Vi::Sum { src: 1, red: 0 },
        Vi::Store { src: 5, acc: 3 },
        Vi::Store { src: 1, acc: 4 },
    ]
}

#[test]
fn gelu_backward_programs_match_their_kernel() {
    for (prog, accs) in [
        (block_program(0), vec![0, 1, 2, 3, 4]),
        (block_program(5), vec![5, 6, 7, 8, 9]),
        (hand_built_program(), vec![0, 1, 2, 3, 4]),
    ] {
        let got = find(&prog).expect("the GELU backward matches");
        assert_eq!(got.kernel, Kernel::GeluTanhBackward);
        assert_eq!(got.accs, accs);
        assert_eq!(got.reds, vec![0]);
    }
}

#[test]
fn near_misses_do_not_match() {
    let base = block_program(0);
    let mut misses: Vec<(&str, Vec<Vi>)> = Vec::new();
    // 0.5 becomes 0.25 in `h`'s factor.
    let mut p = base.clone();
    p[12] = bin(Arith::Mul, 6, r(2), c(0.25));
    misses.push(("a literal", p));
    // 1 - t^2 becomes t^2 - 1.
    let mut p = base.clone();
    p[16] = bin(Arith::Sub, 0, r(5), c(1.0));
    misses.push(("swapped operands", p));
    // Without the bias gradient.
    let mut p = base.clone();
    p.remove(27);
    misses.push(("a missing sum", p));
    // `h` stored where `dy` is, and `dy` into `h`'s access twice over: two stores to one
    // access cannot be two slots.
    let mut p = base.clone();
    p[29] = Vi::Store { src: 7, acc: 4 };
    misses.push(("one access stored twice", p));
    // The bias read from the product's access.
    let mut p = base.clone();
    p[1] = ld(1, 0);
    misses.push(("one access for two loads", p));
    // exp instead of tanh.
    let mut p = base;
    p[8] = Vi::Unary {
        op: Un::Exp,
        dst: 0,
        a: 3,
    };
    misses.push(("another function", p));
    for (what, p) in misses {
        assert_eq!(find(&p), None, "{what}");
    }
}

#[test]
fn gelu_backward_group_is_exact() {
    let fma = crate::exec::isa_level() >= 1;
    let tanh = |x: f32| {
        if fma {
            crate::math::tanh::<true>(x)
        } else {
            crate::math::tanh::<false>(x)
        }
    };
    for (rows, cols) in [(37i64, 200i64), (3, 1000), (5, 67), (256, 1024), (1, 64)] {
        let (n, cu) = ((rows * cols) as usize, cols as usize);
        // Products in [-4, 4): tanh's saturation and both signs.
        let mm: Vec<f32> = data(n, 51).iter().map(|v| v * 4.0).collect();
        let (b, g) = (data(cu, 52), data(n, 53));
        let mut t = Tb::default();
        let (ins, outs) = gelu_backward(&mut t, rows, cols);
        let got = t.run(
            &[
                (ins[0], mm.clone()),
                (ins[1], b.clone()),
                (ins[2], g.clone()),
            ],
            &outs,
        );
        let mut db = vec![0f64; cu];
        for i in 0..n {
            let (b, g) = (b[i % cu], g[i]);
            let y = mm[i] + b;
            let y2 = y * y;
            let z = (y + y2 * y * 0.044715) * 0.797_884_6;
            let th = tanh(z);
            let a = th + 1.0;
            let hy = y * 0.5;
            let h = hy * a;
            let di = (g * hy) * (1.0 - th * th) * 0.797_884_6;
            let dk = di * 0.044715;
            let dk_yy = (dk * y) * y;
            let dy = (((g * a) * 0.5 + di) + dk * y2 + dk_yy) + dk_yy;
            db[i % cu] += f64::from(dy);
            let at = format!("[{rows}, {cols}] at {i}");
            assert_eq!(got[0][i].to_bits(), h.to_bits(), "h {at}");
            assert_eq!(got[1][i].to_bits(), dy.to_bits(), "dy {at}");
        }
        for (j, &want) in db.iter().enumerate() {
            let u = ulp_distance(got[2][j], want as f32);
            assert!(
                u <= 1,
                "[{rows}, {cols}] db[{j}] = {}, want {want} ({u} ulp)",
                got[2][j]
            );
        }
    }
}
