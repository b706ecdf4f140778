//! Programs compiled ahead of time. A group that runs as a program (`chain::Chain::Prog`) is
//! interpreted instruction by instruction on a register file in memory; for a long program
//! that costs far more than its arithmetic. The GPT-2 block's largest backward group (31
//! instructions: the MLP's tanh-GELU recomputed, the gradient through it and the bias
//! gradient) ran at about 2.9 ns an element on one thread, on the program path and on the tile
//! path alike.
//!
//! Each kernel here is written once, against [`Em`], and used two ways: recorded into
//! [`Node`]s, which a group's program must equal (up to which accesses and reductions it
//! reads), and compiled for vectors, where its values stay in registers. Recorded and run are
//! one function, so a match runs exactly the matched operations: each rounds as the
//! interpreter's does, and the group's results keep their bits.

use crate::chain::{Arith, Un, Val, Vi};

/// An operand as recorded: an earlier node's value or an f32 literal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Opd {
    Node(usize),
    Lit(f32),
}

/// One operation of a program in value form: operands name the node that made them, so two
/// programs compare without regard to how their registers were allocated. Accesses and
/// reductions are the program's own numbers (a kernel's are slots a match binds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Node {
    Load {
        acc: usize,
        splat: bool,
    },
    Unary {
        op: Un,
        a: usize,
    },
    Binary {
        op: Arith,
        a: Opd,
        b: Opd,
    },
    Store {
        src: usize,
        acc: usize,
    },
    /// A sum over the rows (into an accumulator per element) or, when `row`, along the row.
    Sum {
        src: usize,
        red: usize,
        row: bool,
    },
}

/// What a kernel is written against.
pub(crate) trait Em {
    type T: Copy;
    /// Access `acc`, contiguous.
    unsafe fn load(&mut self, acc: usize) -> Self::T;
    /// Access `acc`, one value per row (a stride of 0 along the row).
    unsafe fn load_row(&mut self, acc: usize) -> Self::T;
    unsafe fn lit(&mut self, c: f32) -> Self::T;
    unsafe fn bin(&mut self, op: Arith, a: Self::T, b: Self::T) -> Self::T;
    unsafe fn un(&mut self, op: Un, a: Self::T) -> Self::T;
    unsafe fn store(&mut self, v: Self::T, acc: usize);
    /// `v` summed into reduction `red`'s contiguous accumulators.
    unsafe fn sum(&mut self, v: Self::T, red: usize);
    /// `v` summed along the row into reduction `red`'s accumulator for the row.
    unsafe fn row_sum(&mut self, v: Self::T, red: usize);
}

/// The kernels compiled here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// GPT-2's MLP backward through its tanh-GELU (see [`gelu_tanh_backward`]).
    GeluTanhBackward,
    /// A layer norm's backward from its centred input (see [`layer_norm_backward`]).
    LayerNormBackward,
    /// The same from the input and its mean ([`layer_norm_backward`] with `centring`).
    LayerNormBackwardCentring,
    /// The end of a layer norm's input gradient (see [`layer_norm_input_grad`]).
    LayerNormInputGrad,
}

const KERNELS: [Kernel; 4] = [
    Kernel::GeluTanhBackward,
    Kernel::LayerNormBackward,
    Kernel::LayerNormBackwardCentring,
    Kernel::LayerNormInputGrad,
];

impl Kernel {
    /// Runs the kernel's operations on `e`.
    ///
    /// # Safety
    /// As `e`'s methods require.
    #[inline(always)]
    pub(crate) unsafe fn apply<E: Em>(self, e: &mut E) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match self {
                Kernel::GeluTanhBackward => gelu_tanh_backward(e),
                Kernel::LayerNormBackward => layer_norm_backward(e, false),
                Kernel::LayerNormBackwardCentring => layer_norm_backward(e, true),
                Kernel::LayerNormInputGrad => layer_norm_input_grad(e),
            }
        }
    }
}

/// A kernel matched to a group: `accs[slot]` and `reds[slot]` are the group's access and
/// reduction for the kernel's slot; `rows[slot]` whether that reduction is along the row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Aot {
    pub(crate) kernel: Kernel,
    pub(crate) accs: Vec<usize>,
    pub(crate) reds: Vec<usize>,
    pub(crate) rows: Vec<bool>,
}

/// The most reductions a kernel may have.
const MAX_REDS: usize = 4;

/// The kernel whose operations are `prog`'s, if one is.
pub(crate) fn find(prog: &[Vi]) -> Option<Aot> {
    let nodes = nodes_of(prog)?;
    KERNELS.into_iter().find_map(|kernel| {
        let mut rec = Recorder::default();
        // SAFETY: recording touches no memory.
        unsafe { kernel.apply(&mut rec) };
        let (accs, reds) = bind(&rec.nodes, &nodes)?;
        let mut rows = vec![false; reds.len()];
        for n in &rec.nodes {
            if let Node::Sum { red, row: true, .. } = *n {
                rows[red] = true;
            }
        }
        debug_assert!(rows.len() <= MAX_REDS);
        Some(Aot {
            kernel,
            accs,
            reds,
            rows,
        })
    })
}

/// A program's instructions in value form (`None` if one reads a register nothing wrote).
pub(crate) fn nodes_of(prog: &[Vi]) -> Option<Vec<Node>> {
    let mut made: Vec<Option<usize>> = Vec::new();
    let mut nodes = Vec::with_capacity(prog.len());
    let get = |made: &[Option<usize>], r: u8| made.get(r as usize).copied().flatten();
    for i in prog {
        let (node, dst) = match *i {
            Vi::Load { dst, acc, splat } => (Node::Load { acc, splat }, Some(dst)),
            Vi::Unary { op, dst, a } => (
                Node::Unary {
                    op,
                    a: get(&made, a)?,
                },
                Some(dst),
            ),
            Vi::Binary { op, dst, a, b } => {
                let opd = |v: Val| match v {
                    Val::Reg(r) => get(&made, r).map(Opd::Node),
                    Val::Lit(c) => Some(Opd::Lit(c)),
                };
                (
                    Node::Binary {
                        op,
                        a: opd(a)?,
                        b: opd(b)?,
                    },
                    Some(dst),
                )
            }
            Vi::Store { src, acc } => (
                Node::Store {
                    src: get(&made, src)?,
                    acc,
                },
                None,
            ),
            Vi::Sum { src, red, row } => (
                Node::Sum {
                    src: get(&made, src)?,
                    red,
                    row,
                },
                None,
            ),
        };
        if let Some(d) = dst {
            let d = d as usize;
            if made.len() <= d {
                made.resize(d + 1, None);
            }
            made[d] = Some(nodes.len());
        }
        nodes.push(node);
    }
    Some(nodes)
}

/// Binds a kernel's slots to a program's accesses and reductions when the two compute the same
/// values: the same operations on the same operands (literals bit for bit), whatever order
/// their instructions come in (the GPT-2 block and a hand-built trace of it order theirs
/// differently). An elementwise value depends only on its operands, so the kernel's order
/// gives the program's bits.
fn bind(kernel: &[Node], prog: &[Node]) -> Option<(Vec<usize>, Vec<usize>)> {
    if kernel.len() != prog.len() {
        return None;
    }
    let sink = |n: &Node| matches!(n, Node::Store { .. } | Node::Sum { .. });
    let mut m = Match {
        kernel,
        prog,
        nodes: vec![None; kernel.len()],
        taken: vec![false; prog.len()],
        accs: Vec::new(),
        reds: Vec::new(),
    };
    // Each kernel sink against each program sink not yet taken, undoing a failed try (a
    // kernel has a few sinks, so the search is small).
    for k in (0..kernel.len()).filter(|&k| sink(&kernel[k])) {
        let matched = (0..prog.len()).any(|p| {
            if !sink(&prog[p]) || m.taken[p] {
                return false;
            }
            let saved = (
                m.nodes.clone(),
                m.taken.clone(),
                m.accs.clone(),
                m.reds.clone(),
            );
            let ok = m.node(k, p);
            if !ok {
                (m.nodes, m.taken, m.accs, m.reds) = saved;
            }
            ok
        });
        if !matched {
            return None;
        }
    }
    // Every instruction of the program is accounted for, and every slot bound.
    if m.taken.iter().any(|t| !t) {
        return None;
    }
    let full = |v: Vec<Option<usize>>| v.into_iter().collect::<Option<Vec<usize>>>();
    Some((full(m.accs)?, full(m.reds)?))
}

/// The state of [`bind`]'s search: which program node each kernel node is, and which program
/// access or reduction each slot is.
struct Match<'a> {
    kernel: &'a [Node],
    prog: &'a [Node],
    nodes: Vec<Option<usize>>,
    taken: Vec<bool>,
    accs: Vec<Option<usize>>,
    reds: Vec<Option<usize>>,
}

impl Match<'_> {
    /// Whether kernel node `k` can be program node `p` (binding what that needs).
    fn node(&mut self, k: usize, p: usize) -> bool {
        // A kernel's operand that is no node (`Recorder::node`'s usize::MAX) matches nothing.
        let (Some(&kn), Some(&pn)) = (self.kernel.get(k), self.prog.get(p)) else {
            return false;
        };
        if let Some(q) = self.nodes[k] {
            return q == p;
        }
        if self.taken[p] {
            return false;
        }
        let ok = match (kn, pn) {
            (Node::Load { acc: a, splat: s }, Node::Load { acc: b, splat: t }) => {
                s == t && Self::slot(&mut self.accs, a, b)
            }
            (Node::Unary { op, a }, Node::Unary { op: q, a: b }) => op == q && self.node(a, b),
            (Node::Binary { op, a, b }, Node::Binary { op: q, a: c, b: d }) => {
                op == q && self.opd(a, c) && self.opd(b, d)
            }
            (Node::Store { src, acc: a }, Node::Store { src: s, acc: b }) => {
                Self::slot(&mut self.accs, a, b) && self.node(src, s)
            }
            (
                Node::Sum { src, red: a, row },
                Node::Sum {
                    src: s,
                    red: b,
                    row: r,
                },
            ) => row == r && Self::slot(&mut self.reds, a, b) && self.node(src, s),
            _ => false,
        };
        if !ok {
            return false;
        }
        self.nodes[k] = Some(p);
        self.taken[p] = true;
        true
    }

    fn opd(&mut self, a: Opd, b: Opd) -> bool {
        match (a, b) {
            (Opd::Node(x), Opd::Node(y)) => self.node(x, y),
            (Opd::Lit(x), Opd::Lit(y)) => x.to_bits() == y.to_bits(),
            _ => false,
        }
    }

    /// Binds slot `k` to `p`, one to one.
    fn slot(map: &mut Vec<Option<usize>>, k: usize, p: usize) -> bool {
        if map.len() <= k {
            map.resize(k + 1, None);
        }
        match map[k] {
            Some(q) => q == p,
            None if map.contains(&Some(p)) => false,
            None => {
                map[k] = Some(p);
                true
            }
        }
    }
}

/// Records a kernel's operations as nodes.
#[derive(Default)]
struct Recorder {
    nodes: Vec<Node>,
}

impl Recorder {
    fn push(&mut self, n: Node) -> Opd {
        self.nodes.push(n);
        Opd::Node(self.nodes.len() - 1)
    }

    fn node(v: Opd) -> usize {
        match v {
            Opd::Node(n) => n,
            // A kernel stores, sums or applies a unary op to values it computed, never to a
            // literal; usize::MAX matches no program.
            Opd::Lit(_) => usize::MAX,
        }
    }
}

impl Em for Recorder {
    type T = Opd;
    unsafe fn load(&mut self, acc: usize) -> Opd {
        self.push(Node::Load { acc, splat: false })
    }
    unsafe fn load_row(&mut self, acc: usize) -> Opd {
        self.push(Node::Load { acc, splat: true })
    }
    unsafe fn lit(&mut self, c: f32) -> Opd {
        Opd::Lit(c)
    }
    unsafe fn bin(&mut self, op: Arith, a: Opd, b: Opd) -> Opd {
        self.push(Node::Binary { op, a, b })
    }
    unsafe fn un(&mut self, op: Un, a: Opd) -> Opd {
        self.push(Node::Unary {
            op,
            a: Self::node(a),
        })
    }
    unsafe fn store(&mut self, v: Opd, acc: usize) {
        self.push(Node::Store {
            src: Self::node(v),
            acc,
        });
    }
    unsafe fn sum(&mut self, v: Opd, red: usize) {
        self.push(Node::Sum {
            src: Self::node(v),
            red,
            row: false,
        });
    }
    unsafe fn row_sum(&mut self, v: Opd, red: usize) {
        self.push(Node::Sum {
            src: Self::node(v),
            red,
            row: true,
        });
    }
}

/// GPT-2's MLP backward at its GELU (each operation's operands in the order the GPT-2 block's
/// trace gives them; the order of the operations does not matter to a match): from the
/// product `mm` (access 0), the bias row `b` (1) and the incoming gradient `g` (2), with
/// `y = mm + b`, `t = tanh(0.7978846 (y + 0.044715 y^3))`:
/// - the GELU's output `h = (0.5 y)(1 + t)` (access 3: the next product's input);
/// - the gradient `dy = g (1 + t) 0.5 + d + 0.044715 d y^2 + 2 (0.044715 d y) y`, where
///   `d = 0.7978846 (g 0.5 y)(1 - t^2)` (access 4);
/// - the bias gradient, `dy` summed over the rows (reduction 0).
///
/// # Safety
/// As `e`'s methods require.
#[inline(always)]
pub(crate) unsafe fn gelu_tanh_backward<E: Em>(e: &mut E) {
    use Arith::{Add, Mul, Sub};
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let (c_cube, c_scale) = (e.lit(0.044715), e.lit(0.797_884_6));
        let (half, one) = (e.lit(0.5), e.lit(1.0));
        let mm = e.load(0);
        let b = e.load(1);
        let y = e.bin(Add, mm, b);
        let y2 = e.bin(Mul, y, y);
        let y3 = e.bin(Mul, y2, y);
        let k = e.bin(Mul, y3, c_cube);
        let i = e.bin(Add, y, k);
        let z = e.bin(Mul, i, c_scale);
        let t = e.un(Un::Tanh, z);
        let a = e.bin(Add, t, one);
        let g = e.load(2);
        let ga = e.bin(Mul, g, a);
        let hy = e.bin(Mul, y, half);
        let ghy = e.bin(Mul, g, hy);
        let d1 = e.bin(Mul, ga, half);
        let t2 = e.bin(Mul, t, t);
        let omt = e.bin(Sub, one, t2);
        let dz = e.bin(Mul, ghy, omt);
        let di = e.bin(Mul, dz, c_scale);
        let dy0 = e.bin(Add, d1, di);
        let dk = e.bin(Mul, di, c_cube);
        let dk_y = e.bin(Mul, dk, y);
        let dk_y2 = e.bin(Mul, dk, y2);
        let s1 = e.bin(Add, dy0, dk_y2);
        let dk_yy = e.bin(Mul, dk_y, y);
        let s2 = e.bin(Add, s1, dk_yy);
        let dy = e.bin(Add, s2, dk_yy);
        e.sum(dy, 0);
        let h = e.bin(Mul, hy, a);
        e.store(h, 3);
        e.store(dy, 4);
    }
}

/// A kernel evaluated on a block of `K` vectors at `at`.
#[cfg(target_arch = "x86_64")]
struct Ev<'a, V, const K: usize> {
    ctx: &'a crate::exec::Ctx<'a>,
    offs: &'a crate::chain::Offs<'a>,
    aot: &'a Aot,
    at: crate::chain::At,
    /// Per reduction slot summed along the row: `kernels::reduce_tile`'s eight running sums over the run's whole
    /// chunks of 8, and the sum of its last partial chunk.
    lanes: [[f64; 8]; MAX_REDS],
    tails: [f64; MAX_REDS],
    _v: std::marker::PhantomData<V>,
}

#[cfg(target_arch = "x86_64")]
impl<V: crate::simd::Vf32, const K: usize> Ev<'_, V, K> {
    #[inline(always)]
    unsafe fn ptr(&self, slot: usize) -> *mut f32 {
        let acc = self.aot.accs[slot];
        // SAFETY: the offset addresses the run's first element in the access's buffer.
        unsafe { (self.ctx.base[acc] as *mut f32).offset(self.offs.acc[acc] as isize) }
    }
}

#[cfg(target_arch = "x86_64")]
impl<V: crate::simd::Vf32, const K: usize> Em for Ev<'_, V, K> {
    type T = [V; K];
    #[inline(always)]
    unsafe fn load(&mut self, acc: usize) -> [V; K] {
        // SAFETY (all methods): forwarded from `run`: the block is inside every buffer.
        unsafe { crate::chain::load_block::<V, K>(self.ptr(acc), self.at, self.ctx.stream) }
    }
    #[inline(always)]
    unsafe fn load_row(&mut self, acc: usize) -> [V; K] {
        unsafe { [V::splat(*self.ptr(acc)); K] }
    }
    #[inline(always)]
    unsafe fn lit(&mut self, c: f32) -> [V; K] {
        unsafe { [V::splat(c); K] }
    }
    #[inline(always)]
    unsafe fn bin(&mut self, op: Arith, a: [V; K], b: [V; K]) -> [V; K] {
        unsafe { crate::simd::arith_block(op, &a, &b) }
    }
    #[inline(always)]
    unsafe fn un(&mut self, op: Un, a: [V; K]) -> [V; K] {
        let mut out = a;
        for v in out.iter_mut() {
            *v = unsafe { crate::chain::unary(op, *v) };
        }
        out
    }
    #[inline(always)]
    unsafe fn store(&mut self, v: [V; K], acc: usize) {
        unsafe { crate::chain::store_block::<V, K>(self.ptr(acc), &v, self.at) }
    }
    #[inline(always)]
    unsafe fn sum(&mut self, v: [V; K], red: usize) {
        let red = self.aot.reds[red];
        unsafe {
            let p = self.ctx.accs[red].offset(self.offs.red[red] as isize);
            crate::chain::sum_block::<V, K>(p, &v, self.at)
        }
    }
    #[inline(always)]
    unsafe fn row_sum(&mut self, v: [V; K], red: usize) {
        use crate::chain::At;
        let lanes = &mut self.lanes[red];
        match self.at {
            At::Full { .. } => {
                for x in v {
                    unsafe { V::fold8_into_f64(lanes.as_mut_ptr(), x) };
                }
            }
            At::Tail { n, .. } => {
                let mut buf = [0f32; crate::chain::MAX_BLOCK];
                for (k, x) in v.iter().enumerate() {
                    unsafe { V::store(buf.as_mut_ptr().add(V::LANES * k), *x) };
                }
                let whole = n / 8 * 8;
                for c in buf[..whole].chunks_exact(8) {
                    for (s, &x) in lanes.iter_mut().zip(c) {
                        *s += f64::from(x);
                    }
                }
                // As `reduce_tile` sums its remainder.
                self.tails[red] = buf[whole..n].iter().map(|&x| f64::from(x)).sum();
            }
        }
    }
}

/// Runs a matched kernel over `len` elements: blocks of `K` vectors, then one padded tail.
///
/// # Safety
/// As for `chain::run`; `V`'s features are enabled in the caller.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn run<V: crate::simd::Vf32, const K: usize>(
    ctx: &crate::exec::Ctx<'_>,
    aot: &Aot,
    offs: &crate::chain::Offs<'_>,
    len: usize,
) {
    use crate::chain::At;
    debug_assert!(V::LANES * K <= crate::chain::MAX_BLOCK);
    let step = V::LANES * K;
    let full = len / step * step;
    // Non-temporal stores need aligned destinations (see `chain::run_v`).
    let stream = ctx.stream
        && (0..aot.accs.len()).all(|slot| {
            let acc = aot.accs[slot];
            // SAFETY: as in `Ev::ptr`.
            let p = unsafe { (ctx.base[acc] as *const f32).offset(offs.acc[acc] as isize) };
            (p as usize).is_multiple_of(V::LANES * 4)
        });
    let mut ev = Ev::<V, K> {
        ctx,
        offs,
        aot,
        at: At::Full { o: 0, stream },
        lanes: [[0.0; 8]; MAX_REDS],
        // The remainder's sum when there is none, as `reduce_tile` takes it.
        tails: [[0f64; 0].iter().sum(); MAX_REDS],
        _v: std::marker::PhantomData,
    };
    // SAFETY (both loops): forwarded from the caller.
    for o in (0..full).step_by(step) {
        ev.at = At::Full { o, stream };
        unsafe { aot.kernel.apply(&mut ev) };
    }
    if len > full {
        ev.at = At::Tail {
            o: full,
            n: len - full,
        };
        unsafe { aot.kernel.apply(&mut ev) };
    }
    // A run is one tile of the tile path, which folds it with `reduce_tile`: the eight running
    // sums added in turn, then the remainder's sum.
    for (slot, _) in aot.rows.iter().enumerate().filter(|(_, &r)| r) {
        let total = ev.lanes[slot].iter().sum::<f64>() + ev.tails[slot];
        let red = aot.reds[slot];
        // SAFETY: the offset addresses the row's accumulator.
        unsafe {
            let p = ctx.accs[red].offset(offs.red[red] as isize);
            *p = crate::kernels::combine(crate::ops::ReduceOp::Sum, *p, total);
        }
    }
}

/// A layer norm's backward (operands ordered as in the GPT-2 block's trace), from the incoming
/// gradient `g` (access 0), the weight row `w` (1), the centred input `xc` (2) and the row's `rstd` (3):
/// - the bias gradient, `g` summed over the rows (reduction 0), and the weight gradient, `g
///   xhat` summed over the rows (reduction 1), with `xhat = xc rstd`;
/// - the input gradient's per-row sum `(g w) xc` (reduction 2, along the row) and its first
///   term `(g w) rstd` (access 4);
/// - the layer norm's output recomputed, `xhat w + b` with `b` the bias row (access 5), into
///   access 6 (the next product's input).
///
/// When `centring`, the centred input is made here from the input `x` (2) and the row's mean
/// (3), `rstd` is access 4 and `xc` is also stored (access 5); the other accesses follow one
/// further on.
///
/// # Safety
/// As `e`'s methods require.
#[inline(always)]
pub(crate) unsafe fn layer_norm_backward<E: Em>(e: &mut E, centring: bool) {
    use Arith::{Add, Mul, Sub};
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let g = e.load(0);
        e.sum(g, 0);
        let w = e.load(1);
        let gw = e.bin(Mul, g, w);
        let (xc, rstd, at) = if centring {
            let x = e.load(2);
            let mean = e.load_row(3);
            let xc = e.bin(Sub, x, mean);
            (xc, e.load_row(4), 5)
        } else {
            let xc = e.load(2);
            (xc, e.load_row(3), 4)
        };
        let xhat = e.bin(Mul, xc, rstd);
        let gx = e.bin(Mul, g, xhat);
        e.sum(gx, 1);
        let first = e.bin(Mul, gw, rstd);
        let gwx = e.bin(Mul, gw, xc);
        e.row_sum(gwx, 2);
        if centring {
            e.store(xc, at);
        }
        let c = usize::from(centring);
        e.store(first, at + c);
        let xw = e.bin(Mul, xhat, w);
        let b = e.load(at + c + 1);
        let y = e.bin(Add, xw, b);
        e.store(y, at + c + 2);
    }
}

/// The end of a layer norm's input gradient (operands ordered as in the GPT-2 block's trace):
/// from a row scale `s` (access 0, one value per row), `v` (1), `u` (2) and the residual gradient `r` (3),
/// with `a = u + s v` and `b = a + s v`: `-b` summed along the row (reduction 0) and `r + b`
/// into access 4.
///
/// # Safety
/// As `e`'s methods require.
#[inline(always)]
pub(crate) unsafe fn layer_norm_input_grad<E: Em>(e: &mut E) {
    use Arith::{Add, Mul};
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        let s = e.load_row(0);
        let v = e.load(1);
        let sv = e.bin(Mul, s, v);
        let u = e.load(2);
        let a = e.bin(Add, u, sv);
        let b = e.bin(Add, a, sv);
        let nb = e.un(Un::Neg, b);
        e.row_sum(nb, 0);
        let r = e.load(3);
        let out = e.bin(Add, r, b);
        e.store(out, 4);
    }
}
