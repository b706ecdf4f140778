//! `ltorch.sdpa_fwd_lse` and `ltorch.sdpa_bwd` claimed whole, against a naive f64 attention
//! and its gradient written out from the definition (`P = softmax(scale · q kᵀ)`, `dV = Pᵀ dO`,
//! `dS = P ∘ (dO Vᵀ - rowsum(dO ∘ O))`, `dQ = scale · dS K`, `dK = scale · dSᵀ Q`): causal or
//! not, L < S and L > S, sizes that are not multiples of the tiles, no batch dims, both threaded
//! schedules of the backward, inputs that are strided views made in the same region, and the
//! shapes and dtypes that must be left to the decomposition.

use super::{assert_close, data, ints, Tb};
use thunder_abi::{ArgView, DTypeCode, OpView};

fn v(id: u32) -> ArgView {
    ArgView::Value(id)
}

#[derive(Clone)]
struct Case {
    batch: Vec<i64>,
    l: i64,
    s: i64,
    e: i64,
    ev: i64,
    causal: bool,
    scale: Option<f64>,
    /// q comes in as `[..., L, E]` stored `[..., E, L]` (a transpose inside the region), so the
    /// kernels read a strided view.
    q_transposed: bool,
}

fn case(batch: &[i64], (l, s, e, ev): (i64, i64, i64, i64), causal: bool) -> Case {
    Case {
        batch: batch.to_vec(),
        l,
        s,
        e,
        ev,
        causal,
        scale: None,
        q_transposed: false,
    }
}

fn shape(batch: &[i64], dims: &[i64]) -> Vec<i64> {
    let mut s = batch.to_vec();
    s.extend(dims);
    s
}

impl Tb {
    /// Appends a composite op with several outputs.
    fn composite(&mut self, symbol: &str, args: Vec<ArgView>, outs: &[Vec<i64>]) -> Vec<u32> {
        let outputs: Vec<u32> = outs.iter().map(|s| self.value(DTypeCode::F32, s)).collect();
        self.ops.push(OpView {
            symbol: symbol.into(),
            args: args.into(),
            outputs: outputs.clone().into(),
            claimed: false,
            composite: true,
        });
        outputs
    }
}

fn scale_arg(c: &Case) -> ArgView {
    c.scale.map_or(ArgView::None, ArgView::Float)
}

/// q (possibly through a transpose), k, v: returns (inputs, q's value in the trace).
fn qkv(t: &mut Tb, c: &Case) -> (Vec<u32>, [u32; 3]) {
    let b = &c.batch;
    let r = b.len() as i64 + 2;
    let (q_in, q) = if c.q_transposed {
        let stored = t.value(DTypeCode::F32, &shape(b, &[c.e, c.l]));
        let mut perm: Vec<i64> = (0..r).collect();
        perm.swap(r as usize - 2, r as usize - 1);
        let q = t.op(
            "transpose",
            vec![v(stored), ints(&perm)],
            DTypeCode::F32,
            &shape(b, &[c.l, c.e]),
        );
        (stored, q)
    } else {
        let q = t.value(DTypeCode::F32, &shape(b, &[c.l, c.e]));
        (q, q)
    };
    let k = t.value(DTypeCode::F32, &shape(b, &[c.s, c.e]));
    let vv = t.value(DTypeCode::F32, &shape(b, &[c.s, c.ev]));
    (vec![q_in, k, vv], [q, k, vv])
}

/// The case's inputs as stored (q transposed back when the region transposes it).
fn inputs(c: &Case) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let nb: usize = c.batch.iter().product::<i64>() as usize;
    let (l, s, e, ev) = (c.l as usize, c.s as usize, c.e as usize, c.ev as usize);
    // Scores of a few units, so the softmax is neither flat nor one-hot.
    let q: Vec<f32> = data(nb * l * e, 3).iter().map(|x| x * 2.0).collect();
    let k = data(nb * s * e, 5).iter().map(|x| x * 2.0).collect();
    let vv = data(nb * s * ev, 7);
    let g = data(nb * l * ev, 9);
    (q, k, vv, g)
}

fn stored_q(c: &Case, q: &[f32]) -> Vec<f32> {
    if !c.q_transposed {
        return q.to_vec();
    }
    let (l, e) = (c.l as usize, c.e as usize);
    let mut out = vec![0.0; q.len()];
    for b in 0..q.len() / (l * e) {
        for i in 0..l {
            for p in 0..e {
                out[b * l * e + p * l + i] = q[b * l * e + i * e + p];
            }
        }
    }
    out
}

/// out, lse, dq, dk, dv in f64 (the gradient of `Σ out ∘ g`).
fn reference(c: &Case, q: &[f32], k: &[f32], vv: &[f32], g: &[f32]) -> [Vec<f64>; 5] {
    let nb: usize = c.batch.iter().product::<i64>() as usize;
    let (l, s, e, ev) = (c.l as usize, c.s as usize, c.e as usize, c.ev as usize);
    let scale = c.scale.unwrap_or(1.0 / (e as f64).sqrt());
    let mut out = vec![0.0; nb * l * ev];
    let mut lse = vec![0.0; nb * l];
    let (mut dq, mut dk, mut dv) = (
        vec![0.0; nb * l * e],
        vec![0.0; nb * s * e],
        vec![0.0; nb * s * ev],
    );
    for b in 0..nb {
        let (qb, kb, vb, gb) = (b * l * e, b * s * e, b * s * ev, b * l * ev);
        for i in 0..l {
            let visible = |j: usize| !c.causal || j <= i;
            let sc: Vec<f64> = (0..s)
                .map(|j| {
                    let dot: f64 = (0..e)
                        .map(|p| q[qb + i * e + p] as f64 * k[kb + j * e + p] as f64)
                        .sum();
                    if visible(j) {
                        dot * scale
                    } else {
                        f64::NEG_INFINITY
                    }
                })
                .collect();
            let m = sc.iter().fold(f64::NEG_INFINITY, |a, &x| a.max(x));
            let z: f64 = sc.iter().map(|&x| (x - m).exp()).sum();
            lse[b * l + i] = m + z.ln();
            let p: Vec<f64> = sc.iter().map(|&x| (x - m).exp() / z).collect();
            for n in 0..ev {
                out[gb + i * ev + n] = (0..s).map(|j| p[j] * vv[vb + j * ev + n] as f64).sum();
            }
            // dP_ij = g_i · v_j; D_i = g_i · o_i = Σ_j P_ij dP_ij.
            let dp: Vec<f64> = (0..s)
                .map(|j| {
                    (0..ev)
                        .map(|n| g[gb + i * ev + n] as f64 * vv[vb + j * ev + n] as f64)
                        .sum()
                })
                .collect();
            let d: f64 = (0..s).map(|j| p[j] * dp[j]).sum();
            for j in 0..s {
                let ds = p[j] * (dp[j] - d) * scale;
                for n in 0..ev {
                    dv[vb + j * ev + n] += p[j] * g[gb + i * ev + n] as f64;
                }
                for x in 0..e {
                    dq[qb + i * e + x] += ds * k[kb + j * e + x] as f64;
                    dk[kb + j * e + x] += ds * q[qb + i * e + x] as f64;
                }
            }
        }
    }
    [out, lse, dq, dk, dv]
}

/// The forward op on the case's q, k, v (as [`qkv`] makes them): (its inputs, its outputs
/// out and lse).
fn forward_op(t: &mut Tb, c: &Case) -> (Vec<u32>, Vec<u32>) {
    let b = &c.batch;
    let (ins, [qv, kv, vv_id]) = qkv(t, c);
    let outs = t.composite(
        "ltorch.sdpa_fwd_lse",
        vec![
            v(qv),
            v(kv),
            v(vv_id),
            ArgView::Bool(c.causal),
            scale_arg(c),
        ],
        &[shape(b, &[c.l, c.ev]), shape(b, &[c.l])],
    );
    (ins, outs)
}

/// The backward op on the case's q, k, v (as [`qkv`] makes them), dO, out and lse: (its
/// inputs in that order, its outputs dq, dk, dv).
fn backward_op(t: &mut Tb, c: &Case) -> (Vec<u32>, Vec<u32>) {
    let b = &c.batch;
    let (mut ins, [qv, kv, vv_id]) = qkv(t, c);
    let gv = t.value(DTypeCode::F32, &shape(b, &[c.l, c.ev]));
    let ov = t.value(DTypeCode::F32, &shape(b, &[c.l, c.ev]));
    let lv = t.value(DTypeCode::F32, &shape(b, &[c.l]));
    ins.extend([gv, ov, lv]);
    let grads = t.composite(
        "ltorch.sdpa_bwd",
        vec![
            v(gv),
            v(qv),
            v(kv),
            v(vv_id),
            v(ov),
            v(lv),
            ArgView::Bool(c.causal),
            scale_arg(c),
        ],
        &[
            shape(b, &[c.l, c.e]),
            shape(b, &[c.s, c.e]),
            shape(b, &[c.s, c.ev]),
        ],
    );
    (ins, grads)
}

/// Runs the forward, then the backward on the forward's out and lse, and checks all five.
fn check(c: Case) {
    let what = format!(
        "batch {:?} L {} S {} E {} Ev {} causal {} scale {:?} q transposed {}",
        c.batch, c.l, c.s, c.e, c.ev, c.causal, c.scale, c.q_transposed
    );
    let (q, k, vv, g) = inputs(&c);
    let want = reference(&c, &q, &k, &vv, &g);

    let mut t = Tb::default();
    let (ins, outs) = forward_op(&mut t, &c);
    assert_eq!(t.compile(&ins, &outs).attention_stages(), 1, "{what}");
    let vals = [stored_q(&c, &q), k.clone(), vv.clone()];
    let got = t.run(
        &ins.iter().copied().zip(vals.clone()).collect::<Vec<_>>(),
        &outs,
    );
    assert_close(&got[0], &want[0], 2e-5, 2e-6, &format!("{what}: out"));
    assert_close(&got[1], &want[1], 1e-6, 2e-6, &format!("{what}: lse"));

    let mut t = Tb::default();
    let (bins, grads) = backward_op(&mut t, &c);
    assert_eq!(t.compile(&bins, &grads).attention_stages(), 1, "{what}");
    let mut bvals = vals.to_vec();
    bvals.extend([g, got[0].clone(), got[1].clone()]);
    let dg = t.run(&bins.iter().copied().zip(bvals).collect::<Vec<_>>(), &grads);
    for (n, name) in ["dq", "dk", "dv"].iter().enumerate() {
        assert_close(&dg[n], &want[2 + n], 1e-4, 1e-5, &format!("{what}: {name}"));
    }
}

#[test]
fn sdpa_fwd_lse_and_bwd_match_naive() {
    check(case(&[2, 3], (40, 150, 16, 8), false));
    check(case(&[2, 3], (40, 150, 16, 8), true));
    // L > S, causal: the last rows see every key.
    check(case(&[2], (150, 40, 8, 12), true));
    // Keys no query sees (causal, S > L past the tiles): zero gradients.
    check(case(&[1], (3, 200, 4, 4), true));
    check(case(&[], (1, 1, 3, 2), false));
    check(case(&[], (65, 129, 5, 7), true));
    check(Case {
        scale: Some(0.3),
        q_transposed: true,
        ..case(&[2, 2], (33, 70, 8, 8), true)
    });
}

#[test]
fn sdpa_threaded_schedules_match_naive() {
    // Many batch indices: one task each.
    check(case(&[2, 4], (128, 128, 64, 64), true));
    // One batch index: key-block tasks, then query-block tasks.
    check(case(&[1], (300, 260, 32, 16), false));
    check(case(&[1, 1], (300, 260, 32, 16), true));
}

/// An op view of the forward on `q [q_shape]` of `dtype`, for the claim tests.
fn claims(q_shape: &[i64], kv_rows: i64, dtype: DTypeCode, causal: ArgView) -> bool {
    let mut t = Tb::default();
    let r = q_shape.len();
    let mut ks = q_shape.to_vec();
    if r >= 2 {
        ks[r - 2] = kv_rows;
    }
    let q = t.value(dtype, q_shape);
    let k = t.value(dtype, &ks);
    let vv = t.value(dtype, &ks);
    let mut lse = q_shape.to_vec();
    lse.pop();
    let outs = t.composite(
        "ltorch.sdpa_fwd_lse",
        vec![v(q), v(k), v(vv), causal, ArgView::None],
        &[q_shape.to_vec(), lse],
    );
    let view = t.view(&[q, k, vv], &outs);
    crate::accepts(&view, &view.ops[0])
}

#[test]
fn sdpa_claims_only_what_the_kernels_run() {
    assert!(claims(&[2, 5, 4], 6, DTypeCode::F32, ArgView::Bool(true)));
    // Empty queries or keys, a scalar or a vector, f64 and bf16, a non-bool is_causal: left to
    // the decomposition.
    assert!(!claims(&[2, 0, 4], 6, DTypeCode::F32, ArgView::Bool(false)));
    assert!(!claims(&[2, 5, 4], 0, DTypeCode::F32, ArgView::Bool(false)));
    assert!(!claims(&[], 1, DTypeCode::F32, ArgView::Bool(false)));
    assert!(!claims(&[4], 1, DTypeCode::F32, ArgView::Bool(false)));
    assert!(!claims(&[2, 5, 4], 6, DTypeCode::F64, ArgView::Bool(false)));
    assert!(!claims(
        &[2, 5, 4],
        6,
        DTypeCode::BF16,
        ArgView::Bool(false)
    ));
    assert!(!claims(&[2, 5, 4], 6, DTypeCode::F32, ArgView::Int(1)));
}

#[test]
fn sdpa_refusal_names_the_op_and_the_shapes() {
    let mut t = Tb::default();
    let q = t.value(DTypeCode::F32, &[2, 5, 4]);
    let k = t.value(DTypeCode::F32, &[2, 6, 3]);
    let vv = t.value(DTypeCode::F32, &[2, 6, 4]);
    let outs = t.composite(
        "ltorch.sdpa_fwd_lse",
        vec![v(q), v(k), v(vv), ArgView::Bool(false), ArgView::None],
        &[vec![2, 5, 4], vec![2, 5]],
    );
    let view = t.view(&[q, k, vv], &outs);
    let err = crate::sdpa::decode(&view, &view.ops[0]).expect_err("E differs");
    let msg = err.to_string();
    assert!(
        msg.contains("ltorch.sdpa_fwd_lse") && msg.contains("[2, 6, 3]"),
        "{msg}"
    );
}

/// `x` laid out `[b, h, l, e]`, returned as `[b, l, h, e]` (the heads' merge) in f64.
fn merge_heads(x: &[f64], (b, h, l, e): (usize, usize, usize, usize)) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for bi in 0..b {
        for hi in 0..h {
            for li in 0..l {
                for ei in 0..e {
                    out[((bi * l + li) * h + hi) * e + ei] = x[((bi * h + hi) * l + li) * e + ei];
                }
            }
        }
    }
    out
}

/// `[b, l, h, e]` parts concatenated along `dim` (2 or 3).
fn cat_merged(
    parts: &[Vec<f64>],
    (b, l, h, e): (usize, usize, usize, usize),
    dim: usize,
) -> Vec<f64> {
    let n = parts.len();
    let mut out = Vec::with_capacity(n * b * l * h * e);
    for bl in 0..b * l {
        if dim == 2 {
            for p in parts {
                out.extend_from_slice(&p[bl * h * e..(bl + 1) * h * e]);
            }
        } else {
            for hi in 0..h {
                for p in parts {
                    out.extend_from_slice(&p[(bl * h + hi) * e..(bl * h + hi + 1) * e]);
                }
            }
        }
    }
    out
}

/// The heads' merge after the forward (`transpose(out, [0, 2, 1, 3])` then a reshape to
/// `[B, L, H·Ev]`) is written by the kernel itself: no copy stage, same values.
#[test]
fn attention_output_is_written_merged() {
    let c = case(&[2, 3], (20, 20, 8, 8), true);
    let (bb, h, l, e) = (2usize, 3usize, 20usize, 8usize);
    let (q, k, vv, g) = inputs(&c);
    let want = reference(&c, &q, &k, &vv, &g);
    let mut t = Tb::default();
    let (ins, outs) = forward_op(&mut t, &c);
    let y = t.op(
        "transpose",
        vec![v(outs[0]), ints(&[0, 2, 1, 3])],
        DTypeCode::F32,
        &[2, 20, 3, 8],
    );
    let z = t.op(
        "reshape",
        vec![v(y), ints(&[2, 20, 24])],
        DTypeCode::F32,
        &[2, 20, 24],
    );
    // Merged to `[B, L, C]`, then flattened to `[B·L, C]` (a projection's operand) as the
    // region's output: the output slot passes down the reshapes to the kernel.
    let flat = t.op(
        "reshape",
        vec![v(z), ints(&[40, 24])],
        DTypeCode::F32,
        &[40, 24],
    );
    let merged = merge_heads(&want[0], (bb, h, l, e));
    for out in [z, flat] {
        let region = t.compile(&ins, &[out, outs[1]]);
        assert_eq!(
            region.stage_counts(),
            (1, 0),
            "only the attention stage, no copy"
        );
        let got = t.run(
            &ins.iter()
                .copied()
                .zip([q.clone(), k.clone(), vv.clone()])
                .collect::<Vec<_>>(),
            &[out, outs[1]],
        );
        assert_close(&got[0], &merged, 2e-5, 2e-6, "merged out");
        assert_close(&got[1], &want[1], 1e-6, 2e-6, "lse");
    }
}

/// The backward's `cat(dq, dk, dv)` after their head transposes (the split's gradient), along
/// the heads or the last dim, is written by the kernel into the concatenation: no copies.
/// With an input among the parts, only that part is copied.
#[test]
fn attention_gradients_are_written_into_their_concatenation() {
    let c = case(&[2, 3], (20, 20, 8, 8), true);
    let dims = (2usize, 3usize, 20usize, 8usize);
    let (q, k, vv, g) = inputs(&c);
    let want = reference(&c, &q, &k, &vv, &g);
    let merged: Vec<Vec<f64>> = want[2..].iter().map(|x| merge_heads(x, dims)).collect();
    let extra = data(2 * 20 * 3 * 8, 11);
    for (dim, with_input) in [(2usize, false), (3, false), (2, true)] {
        let what = format!("cat along {dim}, an input among the parts: {with_input}");
        let mut t = Tb::default();
        let (mut ins, grads) = backward_op(&mut t, &c);
        let mut parts: Vec<u32> = grads
            .iter()
            .map(|&x| {
                t.op(
                    "transpose",
                    vec![v(x), ints(&[0, 2, 1, 3])],
                    DTypeCode::F32,
                    &[2, 20, 3, 8],
                )
            })
            .collect();
        let mut vals = vec![q.clone(), k.clone(), vv.clone(), g.clone()];
        vals.push(want[0].iter().map(|&x| x as f32).collect());
        vals.push(want[1].iter().map(|&x| x as f32).collect());
        let mut want_parts = merged.clone();
        if with_input {
            let x = t.value(DTypeCode::F32, &[2, 20, 3, 8]);
            ins.push(x);
            vals.push(extra.clone());
            parts[1] = x;
            want_parts[1] = extra.iter().map(|&x| x as f64).collect();
        }
        let mut cat_shape = vec![2i64, 20, 3, 8];
        cat_shape[dim] *= 3;
        let mut args = vec![ArgView::Int(dim as i64)];
        args.extend(parts.iter().map(|&p| v(p)));
        let cat = t.op("cat", args, DTypeCode::F32, &cat_shape);
        let flat = t.op(
            "reshape",
            vec![v(cat), ints(&[2, 20, 72])],
            DTypeCode::F32,
            &[2, 20, 72],
        );
        let mut outs = vec![flat];
        if with_input {
            // dk, unused by the concatenation, is an output of its own.
            outs.push(grads[1]);
        }
        let region = t.compile(&ins, &outs);
        let copies = if with_input { 1 } else { 0 };
        assert_eq!(
            region.pool_and_pad_stages().1,
            copies,
            "{what}: copy stages"
        );
        let got = t.run(&ins.iter().copied().zip(vals).collect::<Vec<_>>(), &outs);
        let want_cat = cat_merged(&want_parts, (2, 20, 3, 8), dim);
        assert_close(
            &got[0],
            &want_cat,
            1e-4,
            1e-5,
            &format!("{what}: concatenation"),
        );
        if with_input {
            assert_close(&got[1], &want[3], 1e-4, 1e-5, &format!("{what}: dk"));
        }
    }
}
