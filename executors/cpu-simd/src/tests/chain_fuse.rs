//! GELU found in a group's instructions (`chain_fuse`): the forms the exporters write become
//! one chain step, with registers reused as the group's allocation reuses them and operands of
//! add and multiply in either order; a GELU whose inner value is read elsewhere, or with a
//! division the other way round, is not fused. The fused step's bits are checked against
//! the same f32 operations in `tests::chain::gelu_programs`.

use crate::chain::{chain_of_ins, Arith, Chain, Gelu, Step};
use crate::decode::{Lit, Ty::F32};
use crate::group::{Ins, Src};
use crate::ops::{BinaryOp, UnaryOp};

const C1: f32 = 0.044715;
const C2: f32 = 0.797_884_6;

fn load(dst: u32, acc: usize) -> Ins {
    Ins::Load { ty: F32, dst, acc }
}

fn store(src: u32, acc: usize) -> Ins {
    Ins::Store { ty: F32, src, acc }
}

fn un(op: UnaryOp, dst: u32, a: u32) -> Ins {
    Ins::Unary {
        ty: F32,
        op,
        dst,
        a,
    }
}

fn bin(op: BinaryOp, dst: u32, a: Src, b: Src) -> Ins {
    Ins::Binary {
        ty: F32,
        op,
        dst,
        a,
        b,
    }
}

fn r(x: u32) -> Src {
    Src::Reg(x)
}

fn c(x: f32) -> Src {
    Src::Lit(Lit::F(f64::from(x)))
}

/// GPT-2's bias + tanh GELU on registers 0-2 (`flip` writes every commutative op's operands
/// the other way round), stored into access 2.
fn tanh_gelu(flip: bool) -> Vec<Ins> {
    use BinaryOp::{Add, Mul};
    let o = |a: Src, b: Src| if flip { (b, a) } else { (a, b) };
    let b2 = |op, dst, (a, b): (Src, Src)| bin(op, dst, a, b);
    vec![
        load(0, 0),
        load(1, 1),
        b2(Add, 0, o(r(0), r(1))),
        b2(Mul, 1, o(r(0), c(0.5))),
        b2(Mul, 2, o(r(0), r(0))),
        b2(Mul, 2, o(r(2), r(0))),
        b2(Mul, 2, o(r(2), c(C1))),
        b2(Add, 2, o(r(0), r(2))),
        b2(Mul, 2, o(r(2), c(C2))),
        un(UnaryOp::Tanh, 2, 2),
        b2(Add, 2, o(r(2), c(1.0))),
        b2(Mul, 0, o(r(1), r(2))),
        store(0, 2),
    ]
}

/// BERT's erf GELU of access 0 into access 1.
fn erf_gelu(div: (Src, Src)) -> Vec<Ins> {
    use BinaryOp::{Add, Div, Mul};
    vec![
        load(0, 0),
        bin(Div, 1, div.0, div.1),
        un(UnaryOp::Erf, 1, 1),
        bin(Add, 1, r(1), c(1.0)),
        bin(Mul, 1, r(0), r(1)),
        bin(Mul, 1, r(1), c(0.5)),
        store(1, 1),
    ]
}

#[test]
fn tanh_gelu_is_one_step() {
    let want = Chain::Line {
        load: 0,
        steps: vec![
            Step::Load {
                op: Arith::Add,
                acc: 1,
                splat: false,
                first: false,
            },
            Step::Gelu(Gelu::Tanh([0.5, C1, C2, 1.0])),
            Step::Store(2),
        ],
    };
    assert_eq!(chain_of_ins(&tanh_gelu(false), &[1, 1, 1]), Some(want));
    // Operands the other way round: the bias add now has the loaded bias first.
    match chain_of_ins(&tanh_gelu(true), &[1, 1, 1]) {
        Some(Chain::Line { steps, .. }) => {
            assert_eq!(steps[1], Step::Gelu(Gelu::Tanh([0.5, C1, C2, 1.0])));
        }
        other => panic!("flipped operands: {other:?}"),
    }
}

#[test]
fn erf_gelu_is_one_step() {
    let sqrt2 = std::f32::consts::SQRT_2;
    let want = Chain::Line {
        load: 0,
        steps: vec![Step::Gelu(Gelu::Erf([sqrt2, 1.0, 0.5])), Step::Store(1)],
    };
    assert_eq!(
        chain_of_ins(&erf_gelu((r(0), c(sqrt2))), &[1, 1]),
        Some(want)
    );
}

fn fused(chain: &Option<Chain>) -> bool {
    matches!(chain, Some(Chain::Line { steps, .. }) if steps.iter().any(|s| matches!(s, Step::Gelu(_))))
}

#[test]
fn lookalikes_are_not_fused() {
    // `sqrt 2 / y` is not `y / sqrt 2` (it is still a chain: `y` is loaded again).
    let swapped = chain_of_ins(&erf_gelu((c(std::f32::consts::SQRT_2), r(0))), &[1, 1]);
    assert!(
        matches!(swapped, Some(Chain::Line { .. })) && !fused(&swapped),
        "{swapped:?}"
    );
    // The tanh is also stored: dropping its instruction would lose that output.
    let mut ins = tanh_gelu(false);
    ins.insert(10, store(2, 3));
    let got = chain_of_ins(&ins, &[1, 1, 1, 1]);
    assert!(matches!(got, Some(Chain::Prog(_))), "{got:?}");
    // A square where the cube is: another function.
    let mut ins = tanh_gelu(false);
    ins[5] = bin(BinaryOp::Mul, 2, r(2), c(1.0));
    let got = chain_of_ins(&ins, &[1, 1, 1]);
    assert!(matches!(got, Some(Chain::Prog(_))), "{got:?}");
}
