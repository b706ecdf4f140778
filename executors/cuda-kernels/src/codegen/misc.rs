//! One thread per output element: full, iota, uniform/normal (Philox4x32-10 with the counter
//! mapping documented on `prims.uniform`, so the numbers equal the interpreter's), matmul
//! (ints wrapping, floats summed in f64, as the interpreter; cuBLAS takes the floats it can), and
//! the binary ops whose integer rule can fail (floor_divide, div, remainder, fmod, pow: a zero
//! divisor or a negative integer exponent is a device error, reported after the launch).

use super::*;
use thunder_abi::prims::BinaryPrim;

pub(super) fn generate(
    spec: &Spec,
    operands: &[&Operand],
    outs: &[DTypeCode],
    base: &str,
) -> Vec<Kernel> {
    let name = format!("{base}_0");
    let out = outs[0];
    let (n, extra, body, params): (u64, String, String, Vec<Param>) = match spec {
        Spec::Full { shape, value, .. } => (
            numel(shape),
            String::new(),
            format!("    out0[e] = {};\n", store(out, &literal(out, *value))),
            vec![Param::Output(0)],
        ),
        Spec::Iota {
            length,
            start,
            step,
            ..
        } => {
            // Exact in wrapping i64, then converted once.
            let v = format!("(i64_t)((u64_t){start}LL + (u64_t)e * (u64_t){step}LL)");
            let v = if out.is_float() {
                format!("(double){v}")
            } else {
                v
            };
            (
                *length as u64,
                String::new(),
                format!("    out0[e] = {};\n", store(out, &v)),
                vec![Param::Output(0)],
            )
        }
        Spec::Random {
            normal,
            shape,
            p,
            seed,
            offset,
            ..
        } => {
            let value = if *normal {
                // Box-Muller, cosine branch.
                format!(
                    "{:?} + {:?} * sqrt(-2.0 * log(((double)x + 1.0) * 2.3283064365386963e-10)) * cos(6.283185307179586 * ((double)y * 2.3283064365386963e-10))",
                    p.0, p.1
                )
            } else {
                format!(
                    "{:?} + ({:?} - {:?}) * (((double)(x >> 5) * 67108864.0 + (double)(y >> 6)) * 1.1102230246251565e-16)",
                    p.0, p.1, p.0
                )
            };
            let body = format!(
                "    const u64_t block = {offset}ULL + (u64_t)e / 2ULL;\n\
                 \x20   unsigned w[4];\n\
                 \x20   philox(block, {seed}ULL, w);\n\
                 \x20   const unsigned x = w[2 * (e % 2)], y = w[2 * (e % 2) + 1];\n\
                 \x20   out0[e] = {};\n",
                store(out, &format!("({value})"))
            );
            (numel(shape), PHILOX.into(), body, vec![Param::Output(0)])
        }
        Spec::Matmul { a, b } => matmul(a, b),
        Spec::Divide {
            op,
            a,
            b,
            shape,
            dtype,
        } => divide(*op, a, b, shape, *dtype),
        _ => return Vec::new(),
    };
    let sig = signature(&name, &params, operands, outs);
    let mut text = element_loop(n);
    text.push_str(&body);
    text.push_str("  }\n");
    vec![Kernel {
        name: name.clone(),
        source: assemble(&extra, &sig, &text),
        launch: Launch::Elements { n, block: 256 },
        params,
    }]
}

/// Philox4x32-10 (Random123's constants), counter `(block lo, block hi, 0, 0)` and key
/// `(seed lo, seed hi)`.
const PHILOX: &str =
    "__device__ __forceinline__ void philox(u64_t block, u64_t seed, unsigned* w) {
  unsigned c0 = (unsigned)block, c1 = (unsigned)(block >> 32), c2 = 0u, c3 = 0u;
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
  }
  w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;
}
";

fn matmul(a: &Operand, b: &Operand) -> (u64, String, String, Vec<Param>) {
    let r = a.rank();
    let (m, k, n) = (a.shape[r - 2], a.shape[r - 1], b.shape[r - 1]);
    let mut out_shape = a.shape[..r - 2].to_vec();
    out_shape.extend([m, n]);
    let mut body = unravel("e", "c", &out_shape, "    ");
    let batch = |op: usize| -> String {
        (0..r - 2)
            .map(|d| format!("c{d} * s{op}_{d} + "))
            .collect::<String>()
    };
    let x = load(
        a.dtype,
        &format!(
            "in0[{}c{} * s0_{} + t * s0_{}]",
            batch(0),
            r - 2,
            r - 2,
            r - 1
        ),
    );
    let y = load(
        b.dtype,
        &format!(
            "in1[{}t * s1_{} + c{} * s1_{}]",
            batch(1),
            r - 2,
            r - 1,
            r - 1
        ),
    );
    let (acc, term, result) = if a.dtype.is_float() {
        ("double", format!("{x} * {y}"), "acc")
    } else {
        ("u64_t", format!("(u64_t){x} * (u64_t){y}"), "(i64_t)acc")
    };
    let _ = writeln!(body, "    {acc} acc = 0;");
    let _ = writeln!(body, "    for (i64_t t = 0; t < {k}LL; ++t) {{");
    let _ = writeln!(body, "      acc += {term};\n    }}");
    let _ = writeln!(body, "    out0[e] = {};", store(a.dtype, result));
    (
        numel(&out_shape),
        String::new(),
        body,
        vec![Param::Input(0), Param::Input(1), Param::Output(0)],
    )
}

/// torch's floor division: `c10::div_floor_floating` for floats (in f64, as the interpreter),
/// integer division rounding down with a device error on a zero divisor.
const DIV_FLOOR: &str = "__device__ __forceinline__ double div_floor(double x, double y) {
  if (y == 0.0) return x / y;
  const double m = fmod(x, y);
  double div = (x - m) / y;
  if (m != 0.0 && ((y < 0.0) != (m < 0.0))) div -= 1.0;
  if (div != 0.0) { double f = floor(div); if (div - f > 0.5) f += 1.0; return f; }
  return (x / y) < 0.0 || __double_as_longlong(x / y) < 0 ? -0.0 : 0.0;
}
";

const DIV_FLOOR_INT: &str = "__device__ __forceinline__ i64_t div_floor_int(i64_t x, i64_t y) {
  if (y == -1) return (i64_t)(0ULL - (u64_t)x);
  const i64_t q = x / y;
  return ((x < 0) != (y < 0) && x % y != 0) ? q - 1 : q;
}
";

/// The integer rules of `thunder_abi`'s table in wrapping i64 (the caller stores to the dtype,
/// wrapping): `INT64_MIN / -1` and `% -1` are spelled out (undefined in C++).
const INT_DIV: &str = "__device__ __forceinline__ i64_t div_trunc_int(i64_t x, i64_t y) {
  return y == -1 ? (i64_t)(0ULL - (u64_t)x) : x / y;
}
__device__ __forceinline__ i64_t fmod_int(i64_t x, i64_t y) { return y == -1 ? 0 : x % y; }
__device__ __forceinline__ i64_t rem_int(i64_t x, i64_t y) {
  const i64_t m = fmod_int(x, y);
  return (m != 0 && ((m < 0) != (y < 0))) ? (i64_t)((u64_t)m + (u64_t)y) : m;
}
";

/// Square-and-multiply in wrapping 64 bits: exact modulo 2^64, hence modulo every narrower width.
const INT_POW: &str = "__device__ __forceinline__ i64_t pow_int(i64_t x, i64_t y) {
  u64_t r = 1ULL, b = (u64_t)x, e = (u64_t)y;
  while (e > 0ULL) { if (e & 1ULL) r *= b; b *= b; e >>= 1; }
  return (i64_t)r;
}
";

fn divide(
    op: BinaryPrim,
    a: &Result<Operand, Lit>,
    b: &Result<Operand, Lit>,
    shape: &[i64],
    dtype: DTypeCode,
) -> (u64, String, String, Vec<Param>) {
    let mut params = Vec::new();
    let mut k = 0;
    let mut side = |o: &Result<Operand, Lit>| match o {
        Ok(op) => {
            params.push(Param::Input(k));
            let text = load(
                dtype,
                &format!("in{k}[{}]", offset(k, op.rank(), |d| format!("c{d}"))),
            );
            k += 1;
            text
        }
        Err(l) => literal(dtype, *l),
    };
    let (x, y) = (side(a), side(b));
    // Only integer division can fail (a zero divisor); float kernels skip the flag and its
    // read-back (a stream synchronization).
    params.push(Param::Output(0));
    if !dtype.is_float() {
        params.push(Param::Flag);
    }
    let mut body = unravel("e", "c", shape, "    ");
    let _ = writeln!(body, "    const {} x = {x}, y = {y};", wide(dtype));
    if dtype.is_float() {
        let _ = writeln!(body, "    out0[e] = {};", store(dtype, "div_floor(x, y)"));
        return (numel(shape), DIV_FLOOR.into(), body, params);
    }
    let (extra, call) = match op {
        BinaryPrim::Pow => (INT_POW, "pow_int(x, y)"),
        BinaryPrim::Div => (INT_DIV, "div_trunc_int(x, y)"),
        BinaryPrim::Remainder => (INT_DIV, "rem_int(x, y)"),
        BinaryPrim::Fmod => (INT_DIV, "fmod_int(x, y)"),
        _ => (DIV_FLOOR_INT, "div_floor_int(x, y)"),
    };
    let _ = if op == BinaryPrim::Pow {
        writeln!(
            body,
            "    if (y < 0) {{ report(err, {ERR_NEG_POW}, y); out0[e] = 0; continue; }}"
        )
    } else {
        writeln!(
            body,
            "    if (y == 0) {{ report(err, {ERR_DIV_ZERO}, 0); out0[e] = 0; continue; }}"
        )
    };
    let _ = writeln!(body, "    out0[e] = {};", store(dtype, call));
    (numel(shape), extra.into(), body, params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use thunder_abi::prims::special::int_pow;

    /// The device helpers compiled as host C (`__device__` dropped; the host C compiler every
    /// Rust link on Linux needs) and run over edge values: each must equal the op table's rule
    /// that the interpreter runs, in wrapping i64 (`INT64_MIN / -1` included).
    #[test]
    fn integer_helpers_match_the_interpreter_rules_on_edge_values() {
        let xs: [i64; 13] = [
            i64::MIN,
            i64::MIN + 1,
            -300,
            -128,
            -7,
            -1,
            0,
            1,
            2,
            7,
            255,
            300,
            i64::MAX,
        ];
        let src = format!(
            "#include <stdio.h>\n#define __device__\n#define __forceinline__ static inline\n\
             typedef long long i64_t;\ntypedef unsigned long long u64_t;\n{DIV_FLOOR_INT}{INT_DIV}{INT_POW}\
             int main(void) {{\n  const i64_t xs[] = {{{}}};\n  const int n = {};\n\
             for (int i = 0; i < n; ++i) for (int j = 0; j < n; ++j) {{\n\
             const i64_t x = xs[i], y = xs[j];\n\
             if (y != 0) printf(\"%lld %lld %lld %lld\\n\", div_trunc_int(x, y), rem_int(x, y), fmod_int(x, y), div_floor_int(x, y));\n\
             else printf(\"-\\n\");\n\
             }}\n  for (int i = 0; i < n; ++i) for (i64_t e = 0; e < 70; ++e) printf(\"%lld\\n\", pow_int(xs[i], e));\n  return 0;\n}}\n",
            xs.iter()
                .map(|x| format!("(i64_t){}ULL", *x as u64))
                .collect::<Vec<_>>()
                .join(", "),
            xs.len()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let (c, exe) = (dir.path().join("h.c"), dir.path().join("h"));
        std::fs::write(&c, src).expect("write");
        let cc = Command::new("cc")
            .args(["-O1", "-o"])
            .arg(&exe)
            .arg(&c)
            .output()
            .expect("the host C compiler `cc`");
        assert!(
            cc.status.success(),
            "{}",
            String::from_utf8_lossy(&cc.stderr)
        );
        let out = Command::new(&exe).output().expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let rule = |p: BinaryPrim, x: i64, y: i64| p.rule().int.map(|f| f(x, y));
        for &x in &xs {
            for &y in &xs {
                let line = lines.next().expect("a line per pair");
                if y == 0 {
                    assert_eq!(line, "-");
                    continue;
                }
                let want: Vec<i64> = [
                    BinaryPrim::Div,
                    BinaryPrim::Remainder,
                    BinaryPrim::Fmod,
                    BinaryPrim::FloorDivide,
                ]
                .iter()
                .map(|&p| match rule(p, x, y) {
                    Some(Ok(v)) => v,
                    other => panic!("{p:?}({x}, {y}): {other:?}"),
                })
                .collect();
                let got: Vec<i64> = line
                    .split(' ')
                    .map(|v| v.parse().expect("an integer"))
                    .collect();
                assert_eq!(
                    got, want,
                    "div, remainder, fmod, floor_divide of ({x}, {y})"
                );
            }
        }
        for &x in &xs {
            for e in 0..70i64 {
                let got: i64 = lines.next().expect("a pow line").parse().expect("int");
                assert_eq!(Ok(got), int_pow(x, e), "pow({x}, {e})");
            }
        }
    }
}
