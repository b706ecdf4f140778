//! Cross-entropy's kernels ([`crate::ce`]): one thread block per row, the row read once.
//!
//! - Forward: an online max / sum-of-exponentials per thread (16-byte vector loads where the
//!   row is contiguous, f32 accumulation), merged across the block in a fixed tree; thread 0
//!   writes the row's log-sum-exp and its loss `lse - x[t]` (0 and not kept when the target is
//!   `ignore_index`; an index outside `0..C` is a device error). A second one-block kernel sums
//!   the per-row losses in f64 in a fixed order (no atomics: the result does not depend on
//!   scheduling) and divides by the kept count.
//! - Backward: a one-block kernel counts the kept rows and writes `grad / count`; then each row
//!   writes `(exp(x - lse) - onehot) * scale` (0 on ignored rows) in the output dtype.

use super::*;

/// Elements per 16-byte vector of `d`.
fn vec_width(d: DTypeCode) -> usize {
    16 / d.size_bytes()
}

/// A stored logit as f32 (the convert the region absorbed is exact).
fn ld(d: DTypeCode, raw: &str) -> String {
    match d {
        DTypeCode::BF16 => format!("bf16_to_f32({raw})"),
        DTypeCode::F16 => format!("f16_to_f32({raw})"),
        _ => format!("((float)({raw}))"),
    }
}

/// An f32 rounded once to `d`.
fn st(d: DTypeCode, v: &str) -> String {
    match d {
        DTypeCode::BF16 => format!("f32_to_bf16({v})"),
        DTypeCode::F16 => format!("f32_to_f16({v})"),
        _ => format!("((float)({v}))"),
    }
}

/// Device code shared by the kernels: the vector load of `d` into `v[]`, the online
/// log-sum-exp state and its merge, integer and f64 sums.
fn helpers(d: DTypeCode) -> String {
    let w = vec_width(d);
    let unpack = match d {
        DTypeCode::BF16 => "  const uint4 q = *p;\n  const unsigned u[4] = {q.x, q.y, q.z, q.w};\n#pragma unroll\n  for (int k = 0; k < 4; ++k) { v[2 * k] = __uint_as_float(u[k] << 16); v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u); }\n".to_string(),
        DTypeCode::F16 => "  const uint4 q = *p;\n  const unsigned u[4] = {q.x, q.y, q.z, q.w};\n#pragma unroll\n  for (int k = 0; k < 4; ++k) { v[2 * k] = f16_to_f32((u16_t)(u[k] & 0xffffu)); v[2 * k + 1] = f16_to_f32((u16_t)(u[k] >> 16)); }\n".to_string(),
        _ => "  const float4 q = *(const float4*)p;\n  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;\n".to_string(),
    };
    format!(
        "#define NEG_INF __int_as_float(0xff800000)\n\
         // {w} logits from one aligned 16-byte load.\n\
         __device__ __forceinline__ void load_vec(const uint4* p, float* v) {{\n{unpack}}}\n\
         // The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.\n\
         struct MS {{ float m; float s; }};\n\
         __device__ __forceinline__ void add1(MS& a, float x) {{\n\
         \x20 if (x > a.m) {{ a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }}\n\
         \x20 else if (x != NEG_INF) a.s += expf(x - a.m);\n}}\n\
         // A vector's elements at once: its max rescales the state once, then one exponential\n\
         // per element, with no branch between them (the per-element form kept the forward\n\
         // issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled\n\
         // difference is the one-instruction exponential (a term it flushes, below 2^-126, is\n\
         // invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.\n\
         __device__ __forceinline__ void add_vec(MS& a, const float* v) {{\n\
         \x20 float m = v[0];\n\
         #pragma unroll\n\
         \x20 for (int k = 1; k < {w}; ++k) m = v[k] > m ? v[k] : m;\n\
         \x20 if (!(m > NEG_INF && m < -NEG_INF)) {{\n\
         #pragma unroll\n\
         \x20   for (int k = 0; k < {w}; ++k) add1(a, v[k]);\n\
         \x20   return;\n\
         \x20 }}\n\
         \x20 if (m > a.m) {{ a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }}\n\
         \x20 const float ms = a.m * 1.4426950408889634f;\n\
         \x20 float s = 0.f;\n\
         #pragma unroll\n\
         \x20 for (int k = 0; k < {w}; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));\n\
         \x20 a.s += s;\n}}\n\
         struct Merge {{ __device__ __forceinline__ MS operator()(MS a, MS b) const {{\n\
         \x20 if (a.m == NEG_INF) return MS{{b.m, b.s + a.s}};\n\
         \x20 if (b.m == NEG_INF) return MS{{a.m, a.s + b.s}};\n\
         \x20 const float m = a.m > b.m ? a.m : b.m;\n\
         \x20 return MS{{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)}};\n}} }};\n\
         struct AddD {{ __device__ __forceinline__ double operator()(double a, double b) const {{ return a + b; }} }};\n\
         struct AddI {{ __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const {{ return a + b; }} }};\n"
    )
}

pub(super) fn generate(
    spec: &Spec,
    operands: &[&Operand],
    outs: &[DTypeCode],
    base: &str,
) -> Vec<Kernel> {
    match spec {
        Spec::CrossEntropy {
            logits,
            rows,
            classes,
            ignore_index,
            loss,
            ..
        } => forward(
            logits,
            (*rows, *classes),
            *ignore_index,
            *loss,
            operands,
            outs,
            base,
        ),
        Spec::CrossEntropyBwd {
            logits,
            rows,
            classes,
            ignore_index,
            out,
            grad,
            ..
        } => backward(
            logits,
            (*rows, *classes),
            grad.dtype,
            *ignore_index,
            *out,
            operands,
            outs,
            base,
        ),
        _ => Vec::new(),
    }
}

/// Code computing `roff`, the offset of row `row` of operand `k` (its leading dims
/// flattened), and the name of its class stride.
fn row_offset(k: usize, a: &Operand) -> (String, String) {
    let lead = &a.shape[..a.rank() - 1];
    let mut code = unravel("row", "q", lead, "    ");
    let terms: Vec<String> = (0..lead.len())
        .map(|d| format!("q{d} * s{k}_{d}"))
        .collect();
    let _ = writeln!(
        code,
        "    const i64_t roff = {};",
        if terms.is_empty() {
            "0".to_string()
        } else {
            terms.join(" + ")
        }
    );
    (code, format!("s{k}_{}", a.rank() - 1))
}

fn forward(
    logits: &Operand,
    (n, c): (i64, i64),
    ignore: i64,
    loss: DTypeCode,
    operands: &[&Operand],
    outs: &[DTypeCode],
    base: &str,
) -> Vec<Kernel> {
    let d = logits.dtype;
    let w = vec_width(d);
    let block = row_block((c + w as i64 - 1) / w as i64, 512);
    let ty = storage(d);
    let name0 = format!("{base}_0");
    let params0 = vec![
        Param::Input(0),
        Param::Input(1),
        Param::Output(1),
        Param::Output(2),
        Param::Output(3),
        Param::Flag,
    ];
    let mut b = String::new();
    let _ = writeln!(b, "  __shared__ MS buf[{block}];");
    b.push_str(&row_loop(n as u64));
    let (roff, cs) = row_offset(0, logits);
    b.push_str(&roff);
    let _ = writeln!(b, "    const {ty}* p = in0 + roff;");
    b.push_str("    MS a = {NEG_INF, 0.f};\n");
    let _ = writeln!(
        b,
        "    if ({cs} == 1 && (((u64_t)p) % sizeof({ty})) == 0) {{\n\
         \x20     i64_t head = (i64_t)(((16 - (((u64_t)p) & 15)) & 15) / sizeof({ty}));\n\
         \x20     if (head > {c}LL) head = {c}LL;\n\
         \x20     for (i64_t j = threadIdx.x; j < head; j += blockDim.x) add1(a, {});\n\
         \x20     const i64_t nv = ({c}LL - head) / {w};\n\
         \x20     const uint4* pv = (const uint4*)(p + head);\n\
         \x20     // Four vectors a thread in flight before the first is summed (in the same order).\n\
         \x20     i64_t i = threadIdx.x;\n\
         \x20     for (; i + 3 * (i64_t)blockDim.x < nv; i += 4 * (i64_t)blockDim.x) {{\n\
         \x20       float v[4][{w}];\n\
         #pragma unroll\n        for (int vi = 0; vi < 4; ++vi) load_vec(pv + i + vi * (i64_t)blockDim.x, v[vi]);\n\
         #pragma unroll\n        for (int vi = 0; vi < 4; ++vi) add_vec(a, v[vi]);\n      }}\n\
         \x20     for (; i < nv; i += blockDim.x) {{\n\
         \x20       float v[{w}];\n        load_vec(pv + i, v);\n\
         \x20       add_vec(a, v);\n      }}\n\
         \x20     for (i64_t j = head + nv * {w} + threadIdx.x; j < {c}LL; j += blockDim.x) add1(a, {});\n\
         \x20   }} else {{\n\
         \x20     for (i64_t j = threadIdx.x; j < {c}LL; j += blockDim.x) add1(a, {});\n    }}",
        ld(d, "p[j]"),
        ld(d, "p[j]"),
        ld(d, &format!("p[j * {cs}]"))
    );
    b.push_str("    a = block_fold(a, Merge(), buf);\n");
    let _ = writeln!(
        b,
        "    if (threadIdx.x == 0) {{\n\
         \x20     const float lse = a.m + logf(a.s);\n\
         \x20     out1[row] = lse;\n\
         \x20     const i64_t t = (i64_t)in1[row * s1_0];\n\
         \x20     float l = 0.f;\n      u8_t kept = 0;\n\
         \x20     if (t != {ignore}LL) {{\n\
         \x20       if (t < 0 || t >= {c}LL) report(err, {ERR_INDEX}, t);\n\
         \x20       else {{ l = lse - {}; kept = 1; }}\n      }}\n\
         \x20     out2[row] = l;\n      out3[row] = kept;\n    }}\n  }}",
        ld(d, &format!("p[t * {cs}]"))
    );
    let k0 = Kernel {
        source: assemble(
            &helpers(d),
            &signature(&name0, &params0, operands, outs),
            &b,
        ),
        name: name0,
        launch: Launch::Rows {
            rows: n as u64,
            block,
        },
        params: params0,
    };
    let name1 = format!("{base}_1");
    let params1 = vec![Param::Output(2), Param::Output(3), Param::Output(0)];
    let mut b = String::new();
    b.push_str("  __shared__ double dbuf[1024];\n  __shared__ i64_t cbuf[1024];\n");
    b.push_str("  double total = 0.0;\n  i64_t count = 0;\n");
    let _ = writeln!(
        b,
        "  for (i64_t r = threadIdx.x; r < {n}LL; r += blockDim.x) {{ total += (double)out2[r]; count += out3[r]; }}"
    );
    b.push_str(
        "  total = block_fold(total, AddD(), dbuf);\n  count = block_fold(count, AddI(), cbuf);\n",
    );
    let _ = writeln!(
        b,
        "  // 0 / 0 is NaN when every row is ignored, as torch.\n  if (threadIdx.x == 0) out0[0] = {};",
        store(loss, "total / (double)count")
    );
    let k1 = Kernel {
        source: assemble(
            &helpers(d),
            &signature(&name1, &params1, operands, outs),
            &b,
        ),
        name: name1,
        launch: Launch::Rows {
            rows: 1,
            block: 1024,
        },
        params: params1,
    };
    vec![k0, k1]
}

/// The store of `VEC` f32 results `r[]` to `o` (aligned) as dtype `out`.
fn store_vec(out: DTypeCode, w: usize) -> String {
    match (out, w) {
        (DTypeCode::F32, 4) => "*(float4*)o = make_float4(r[0], r[1], r[2], r[3]);".into(),
        (DTypeCode::F32, _) => "((float4*)o)[0] = make_float4(r[0], r[1], r[2], r[3]); ((float4*)o)[1] = make_float4(r[4], r[5], r[6], r[7]);".into(),
        (_, 8) => format!(
            "unsigned u[4];\n#pragma unroll\n          for (int k = 0; k < 4; ++k) u[k] = (unsigned){} | ((unsigned){} << 16);\n          *(uint4*)o = make_uint4(u[0], u[1], u[2], u[3]);",
            st(out, "r[2 * k]"),
            st(out, "r[2 * k + 1]")
        ),
        _ => format!(
            "*(uint2*)o = make_uint2((unsigned){} | ((unsigned){} << 16), (unsigned){} | ((unsigned){} << 16));",
            st(out, "r[0]"),
            st(out, "r[1]"),
            st(out, "r[2]"),
            st(out, "r[3]")
        ),
    }
}

#[allow(clippy::too_many_arguments)]
fn backward(
    logits: &Operand,
    (n, c): (i64, i64),
    grad_dtype: DTypeCode,
    ignore: i64,
    out: DTypeCode,
    operands: &[&Operand],
    outs: &[DTypeCode],
    base: &str,
) -> Vec<Kernel> {
    let d = logits.dtype;
    let w = vec_width(d);
    let name0 = format!("{base}_0");
    let params0 = vec![Param::Input(0), Param::Input(2), Param::Output(1)];
    let mut b = String::new();
    b.push_str("  __shared__ i64_t cbuf[1024];\n  i64_t count = 0;\n");
    let _ = writeln!(
        b,
        "  for (i64_t r = threadIdx.x; r < {n}LL; r += blockDim.x) count += ((i64_t)in2[r * s2_0] != {ignore}LL);"
    );
    b.push_str("  count = block_fold(count, AddI(), cbuf);\n");
    let _ = writeln!(
        b,
        "  if (threadIdx.x == 0) out1[0] = {} / (float)count;",
        ld(grad_dtype, "in0[0]")
    );
    let k0 = Kernel {
        source: assemble(
            &helpers(d),
            &signature(&name0, &params0, operands, outs),
            &b,
        ),
        name: name0,
        launch: Launch::Rows {
            rows: 1,
            block: 1024,
        },
        params: params0,
    };
    let name1 = format!("{base}_1");
    let params1 = vec![
        Param::Input(1),
        Param::Input(2),
        Param::Input(3),
        Param::Output(1),
        Param::Output(0),
    ];
    let block = row_block((c + w as i64 - 1) / w as i64, 512);
    let (ty, oty) = (storage(d), storage(out));
    let same_size = d.size_bytes() == out.size_bytes();
    let mut b = String::new();
    b.push_str(&row_loop(n as u64));
    let (roff, cs) = row_offset(1, logits);
    b.push_str(&roff);
    let _ = writeln!(
        b,
        "    const {ty}* p = in1 + roff;\n\
         \x20   {oty}* orow = out0 + row * {c}LL;\n\
         \x20   const i64_t t = (i64_t)in2[row * s2_0];\n\
         \x20   const float lse = in3[row * s3_0];\n\
         \x20   const float lse2 = lse * 1.4426950408889634f;\n\
         \x20   // 0 on ignored rows, even when every row is ignored (the count is 0).\n\
         \x20   const float rs = t != {ignore}LL ? out1[0] : 0.f;"
    );
    // A half-type gradient takes the hardware's exp2 of a scaled difference (within a few f32
    // ulps, as exp(x - lse) is, far below the half type's rounding; results below 2^-126 flush
    // to zero); an f32 one keeps expf.
    let half = matches!(out, DTypeCode::BF16 | DTypeCode::F16);
    let exp = |x: &str| {
        if half {
            format!("fast_exp2(fmaf({x}, 1.4426950408889634f, -lse2))")
        } else {
            format!("expf({x} - lse)")
        }
    };
    let scalar = |j: &str| {
        format!(
            "{{ const float r = ({} - ({j} == t ? 1.f : 0.f)) * rs; orow[{j}] = {}; }}",
            exp(&ld(d, &format!("p[{j} * {cs}]"))),
            st(out, "r")
        )
    };
    if same_size {
        // Rows of any length (a vocabulary of 50,257) whose logits and gradient start at the
        // same offset from a 16-byte boundary: a scalar head up to it, vectors, a scalar tail.
        let _ = writeln!(
            b,
            "    if ({cs} == 1 && (((u64_t)p) % sizeof({ty})) == 0 && (((u64_t)p) & 15) == (((u64_t)orow) & 15)) {{\n\
             \x20     i64_t head = (i64_t)(((16 - (((u64_t)p) & 15)) & 15) / sizeof({ty}));\n\
             \x20     if (head > {c}LL) head = {c}LL;\n\
             \x20     for (i64_t j = threadIdx.x; j < head; j += blockDim.x) {}\n\
             \x20     const i64_t nv = ({c}LL - head) / {w};\n\
             \x20     for (i64_t i = threadIdx.x; i < nv; i += blockDim.x) {{\n\
             \x20       const i64_t j0 = head + i * {w};\n\
             \x20       float v[{w}], r[{w}];\n        load_vec((const uint4*)(p + j0), v);\n\
             #pragma unroll\n        for (int k = 0; k < {w}; ++k) r[k] = ({} - (j0 + k == t ? 1.f : 0.f)) * rs;\n\
             \x20       {oty}* o = orow + j0;\n        {}\n      }}\n\
             \x20     for (i64_t j = head + nv * {w} + threadIdx.x; j < {c}LL; j += blockDim.x) {}\n\
             \x20     continue;\n    }}",
            scalar("j"),
            exp("v[k]"),
            store_vec(out, w),
            scalar("j"),
        );
    }
    let _ = writeln!(
        b,
        "    for (i64_t j = threadIdx.x; j < {c}LL; j += blockDim.x) {}\n  }}",
        scalar("j")
    );
    let k1 = Kernel {
        source: assemble(
            &helpers(d),
            &signature(&name1, &params1, operands, outs),
            &b,
        ),
        name: name1,
        launch: Launch::Rows {
            rows: n as u64,
            block,
        },
        params: params1,
    };
    vec![k0, k1]
}
