//! Kernels that move elements by index: take / take_along_axis (a gather per output element,
//! bounds-checked), scatter_add / index_add (a copy of the input, then one atomic add per
//! source element; float sums therefore depend on the order the atomics land in), and pad with
//! interior padding (each output element finds its source or the padding value).

use super::*;
use crate::spec::Operand;

pub(super) fn generate(
    spec: &Spec,
    operands: &[&Operand],
    outs: &[DTypeCode],
    base: &str,
) -> Vec<Kernel> {
    match spec {
        Spec::Take {
            a,
            index,
            dim,
            along,
        } => vec![take(
            &format!("{base}_0"),
            a,
            index,
            *dim,
            *along,
            operands,
            outs,
        )],
        Spec::ScatterAdd {
            a,
            index,
            src,
            dim,
            scatter,
            deterministic: true,
        } => vec![gather_add(
            &format!("{base}_0"),
            (a, index, src),
            *dim,
            *scatter,
            operands,
            outs,
        )],
        Spec::ScatterAdd {
            a,
            index,
            src,
            dim,
            scatter,
            deterministic: false,
        } => vec![
            copy(&format!("{base}_0"), a, operands, outs),
            scatter_add(
                &format!("{base}_1"),
                a,
                index,
                src,
                *dim,
                *scatter,
                operands,
                outs,
            ),
        ],
        Spec::Pad {
            a,
            value,
            config,
            out_shape,
        } => vec![pad(
            &format!("{base}_0"),
            a,
            *value,
            config,
            out_shape,
            operands,
            outs,
        )],
        _ => Vec::new(),
    }
}

fn block() -> u32 {
    256
}

fn take(
    name: &str,
    a: &Operand,
    index: &Operand,
    dim: usize,
    along: bool,
    operands: &[&Operand],
    outs: &[DTypeCode],
) -> Kernel {
    let mut out_shape = a.shape.clone();
    out_shape[dim] = if along { 0 } else { index.shape[0] };
    if along {
        out_shape.clone_from(&index.shape);
    }
    let n = numel(&out_shape);
    let params = vec![
        Param::Input(0),
        Param::Input(1),
        Param::Output(0),
        Param::Flag,
    ];
    let sig = signature(name, &params, operands, outs);
    let index_off = if along {
        offset(1, index.rank(), |d| format!("c{d}"))
    } else {
        format!("c{dim} * s1_0")
    };
    let size = a.shape[dim];
    let mut b = element_loop(n);
    b.push_str(&unravel("e", "c", &out_shape, "    "));
    let _ = writeln!(
        b,
        "    const i64_t ix = {};",
        load(index.dtype, &format!("in1[{index_off}]"))
    );
    let _ = writeln!(
        b,
        "    if (ix < 0 || ix >= {size}LL) {{ report(err, {ERR_INDEX}, ix); out0[e] = 0; continue; }}"
    );
    let off = offset(0, a.rank(), |d| {
        if d == dim {
            "ix".into()
        } else {
            format!("c{d}")
        }
    });
    let _ = writeln!(b, "    out0[e] = in0[{off}];\n  }}");
    Kernel {
        name: name.into(),
        source: assemble("", &sig, &b),
        launch: Launch::Elements { n, block: block() },
        params,
    }
}

/// `out0 = a`, contiguous.
fn copy(name: &str, a: &Operand, operands: &[&Operand], outs: &[DTypeCode]) -> Kernel {
    let n = numel(&a.shape);
    let params = vec![Param::Input(0), Param::Output(0)];
    let sig = signature(name, &params, operands, outs);
    let mut b = element_loop(n);
    b.push_str(&unravel("e", "c", &a.shape, "    "));
    let _ = writeln!(
        b,
        "    out0[e] = in0[{}];\n  }}",
        offset(0, a.rank(), |d| format!("c{d}"))
    );
    Kernel {
        name: name.into(),
        source: assemble("", &sig, &b),
        launch: Launch::Elements { n, block: block() },
        params,
    }
}

/// `add_at(p, v)`: an atomic add of a stored value at `p`, for the dtype `d` (sub-word dtypes
/// through a compare-and-swap on their 32-bit word; b8 as a logical or).
fn add_at(d: DTypeCode) -> String {
    let ty = storage(d);
    let sub_word = |bits: u32, new: &str| {
        let (mask, shift) = if bits == 16 {
            ("0xffffu", "(((u64_t)p & 2) ? 16u : 0u)")
        } else {
            ("0xffu", "(unsigned)(((u64_t)p & 3) * 8)")
        };
        let cur_ty = if bits == 16 { "u16_t" } else { "u8_t" };
        format!(
            "__device__ __forceinline__ void add_at({ty}* p, {ty} v) {{\n\
             \x20 unsigned* w = (unsigned*)((u64_t)p & ~(u64_t)3);\n\
             \x20 const unsigned sh = {shift};\n\
             \x20 unsigned old = *w, assumed;\n\
             \x20 do {{\n\
             \x20   assumed = old;\n\
             \x20   const {cur_ty} cur = ({cur_ty})(assumed >> sh);\n\
             \x20   const {cur_ty} nv = {new};\n\
             \x20   old = atomicCAS(w, assumed, (assumed & ~({mask} << sh)) | ((unsigned)nv << sh));\n\
             \x20 }} while (old != assumed);\n}}\n"
        )
    };
    match d {
        DTypeCode::F32 | DTypeCode::F64 | DTypeCode::I32 => format!(
            "__device__ __forceinline__ void add_at({ty}* p, {ty} v) {{ atomicAdd(p, v); }}\n"
        ),
        DTypeCode::I64 => "__device__ __forceinline__ void add_at(i64_t* p, i64_t v) { atomicAdd((u64_t*)p, (u64_t)v); }\n".into(),
        DTypeCode::F16 => sub_word(16, "f32_to_f16(f16_to_f32(cur) + f16_to_f32(v))"),
        DTypeCode::BF16 => sub_word(16, "f32_to_bf16(bf16_to_f32(cur) + bf16_to_f32(v))"),
        DTypeCode::I16 => sub_word(16, "(u16_t)(cur + (u16_t)v)"),
        DTypeCode::U8 | DTypeCode::I8 => sub_word(8, "(u8_t)(cur + (u8_t)v)"),
        DTypeCode::Bool => "__device__ __forceinline__ void add_at(u8_t* p, u8_t v) {\n\
             \x20 if (v) atomicOr((unsigned*)((u64_t)p & ~(u64_t)3), 1u << (unsigned)(((u64_t)p & 3) * 8));\n}\n"
            .into(),
    }
}

#[allow(clippy::too_many_arguments)]
fn scatter_add(
    name: &str,
    a: &Operand,
    index: &Operand,
    src: &Operand,
    dim: usize,
    scatter: bool,
    operands: &[&Operand],
    outs: &[DTypeCode],
) -> Kernel {
    // scatter_add: one thread per index element (src may be larger); index_add: one per src.
    let domain = if scatter { &index.shape } else { &src.shape };
    let n = numel(domain);
    let params = vec![
        Param::Input(1),
        Param::Input(2),
        Param::Output(0),
        Param::Flag,
    ];
    let sig = signature(name, &params, operands, outs);
    let index_off = if scatter {
        offset(1, index.rank(), |d| format!("c{d}"))
    } else {
        format!("c{dim} * s1_0")
    };
    let size = a.shape[dim];
    let mut stride = 1i64;
    let mut out_strides = vec![0i64; a.rank()];
    for d in (0..a.rank()).rev() {
        out_strides[d] = stride;
        stride *= a.shape[d];
    }
    let target = if a.rank() == 0 {
        "0".to_string()
    } else {
        (0..a.rank())
            .map(|d| {
                let c = if d == dim {
                    "ix".to_string()
                } else {
                    format!("c{d}")
                };
                format!("{c} * {}LL", out_strides[d])
            })
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let mut b = element_loop(n);
    b.push_str(&unravel("e", "c", domain, "    "));
    let _ = writeln!(
        b,
        "    const i64_t ix = {};",
        load(index.dtype, &format!("in1[{index_off}]"))
    );
    let _ = writeln!(
        b,
        "    if (ix < 0 || ix >= {size}LL) {{ report(err, {ERR_INDEX}, ix); continue; }}"
    );
    let _ = writeln!(
        b,
        "    add_at(out0 + ({target}), in2[{}]);\n  }}",
        offset(2, src.rank(), |d| format!("c{d}"))
    );
    Kernel {
        name: name.into(),
        source: assemble(&add_at(a.dtype), &sig, &b),
        launch: Launch::Elements { n, block: block() },
        params,
    }
}

fn pad(
    name: &str,
    a: &Operand,
    value: Lit,
    config: &[(i64, i64, i64)],
    out_shape: &[i64],
    operands: &[&Operand],
    outs: &[DTypeCode],
) -> Kernel {
    let n = numel(out_shape);
    let params = vec![Param::Input(0), Param::Output(0)];
    let sig = signature(name, &params, operands, outs);
    let mut b = element_loop(n);
    b.push_str(&unravel("e", "c", out_shape, "    "));
    b.push_str("    bool inside = true;\n    i64_t off = 0;\n");
    for (d, &(lo, _, interior)) in config.iter().enumerate() {
        let step = interior + 1;
        let _ = writeln!(
            b,
            "    {{ const i64_t p = c{d} - ({lo}LL); if (p < 0 || p % {step}LL != 0 || p / {step}LL >= {}LL) inside = false; else off += (p / {step}LL) * s0_{d}; }}",
            a.shape[d]
        );
    }
    let fill = store(a.dtype, &literal(a.dtype, value));
    let _ = writeln!(b, "    out0[e] = inside ? in0[off] : {fill};\n  }}");
    Kernel {
        name: name.into(),
        source: assemble("", &sig, &b),
        launch: Launch::Elements { n, block: block() },
        params,
    }
}

/// Deterministic scatter_add / index_add: each output element starts from `a` and adds, in
/// index order, the sources whose index names it, in the wide type (f64 for floats), so the
/// result is the interpreter's to the bit. A first loop checks every index (the error flag).
/// It reads the index once per output element: fine for small index dims, slow for
/// embedding-sized ones (the atomic form is the default).
fn gather_add(
    name: &str,
    (a, index, src): (&Operand, &Operand, &Operand),
    dim: usize,
    scatter: bool,
    operands: &[&Operand],
    outs: &[DTypeCode],
) -> Kernel {
    let n = numel(&a.shape);
    let size = a.shape[dim];
    let params = vec![
        Param::Input(0),
        Param::Input(1),
        Param::Input(2),
        Param::Output(0),
        Param::Flag,
    ];
    let sig = signature(name, &params, operands, outs);
    let ni = numel(&index.shape);
    let mut b = String::new();
    let _ = writeln!(
        b,
        "  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < {ni}LL; e += (i64_t)gridDim.x * blockDim.x) {{"
    );
    b.push_str(&unravel("e", "c", &index.shape, "    "));
    let _ = writeln!(
        b,
        "    const i64_t ix = {};\n    if (ix < 0 || ix >= {size}LL) report(err, {ERR_INDEX}, ix);\n  }}",
        load(
            index.dtype,
            &format!("in1[{}]", offset(1, index.rank(), |d| format!("c{d}")))
        )
    );
    b.push_str(&element_loop(n));
    b.push_str(&unravel("e", "c", &a.shape, "    "));
    let w = wide(a.dtype);
    let _ = writeln!(
        b,
        "    {w} acc = {};",
        load(
            a.dtype,
            &format!("in0[{}]", offset(0, a.rank(), |d| format!("c{d}")))
        )
    );
    let (len, index_at) = if scatter {
        // Only index elements with this element's coordinates off `dim` reach it.
        let inside: Vec<String> = (0..a.rank())
            .filter(|&d| d != dim)
            .map(|d| format!("c{d} < {}LL", index.shape[d]))
            .collect();
        if !inside.is_empty() {
            let _ = writeln!(b, "    if ({})", inside.join(" && "));
        }
        let at = offset(1, index.rank(), |d| {
            if d == dim {
                "k".into()
            } else {
                format!("c{d}")
            }
        });
        (index.shape[dim], format!("in1[{at}]"))
    } else {
        (index.shape[0], "in1[k * s1_0]".to_string())
    };
    let src_at = offset(2, src.rank(), |d| {
        if d == dim {
            "k".into()
        } else {
            format!("c{d}")
        }
    });
    let v = load(src.dtype, &format!("in2[{src_at}]"));
    let add = if a.dtype == DTypeCode::Bool {
        format!("acc = acc | {v};")
    } else if a.dtype.is_float() {
        format!("acc += {v};")
    } else {
        format!("acc = (i64_t)((u64_t)acc + (u64_t){v});")
    };
    let _ = writeln!(
        b,
        "    for (i64_t k = 0; k < {len}LL; ++k) {{\n      if ({} == c{dim}) {{ {add} }}\n    }}",
        load(index.dtype, &index_at)
    );
    let _ = writeln!(b, "    out0[e] = {};\n  }}", store(a.dtype, "acc"));
    Kernel {
        name: name.into(),
        source: assemble("", &sig, &b),
        launch: Launch::Elements {
            n: n.max(ni),
            block: block(),
        },
        params,
    }
}
