//! Integer convolution (cuDNN convolves floats only): one thread per output element, a direct
//! loop over the group's input channels and the kernel taps, padding skipped, products summed
//! in wrapping 64 bits and wrapped to the dtype once, as the interpreter.

use super::*;

pub(super) fn generate(
    spec: &Spec,
    operands: &[&Operand],
    outs: &[DTypeCode],
    base: &str,
) -> Vec<Kernel> {
    let Spec::Conv {
        a,
        w,
        bias,
        stride,
        padding,
        dilation,
        groups,
        out_shape,
    } = spec
    else {
        return Vec::new();
    };
    let name = format!("{base}_0");
    let spatial = out_shape.len() - 2;
    let (cin_g, cout_g) = (w.shape[1], w.shape[0] / groups);
    let taps: i64 = w.shape[2..].iter().product();
    let mut params = vec![Param::Input(0), Param::Input(1)];
    if bias.is_some() {
        params.push(Param::Input(2));
    }
    params.push(Param::Output(0));

    let mut body = unravel("e", "c", out_shape, "    ");
    let init = match bias {
        Some(b) => format!("(u64_t){}", load(b.dtype, "in2[c1 * s2_0]")),
        None => "0ULL".into(),
    };
    let _ = writeln!(body, "    const i64_t g = c1 / {cout_g}LL;");
    let _ = writeln!(body, "    u64_t acc = {init};");
    let _ = writeln!(body, "    for (i64_t ci = 0; ci < {cin_g}LL; ++ci) {{");
    let _ = writeln!(body, "      for (i64_t k = 0; k < {taps}LL; ++k) {{");
    body.push_str(&unravel("k", "k", &w.shape[2..], "        "));
    let mut in_off = vec![
        "c0 * s0_0".to_string(),
        format!("(g * {cin_g}LL + ci) * s0_1"),
    ];
    let mut w_off = vec!["c1 * s1_0".to_string(), "ci * s1_1".to_string()];
    for d in 0..spatial {
        let _ = writeln!(
            body,
            "        const i64_t p{d} = c{} * {}LL + k{d} * {}LL - {}LL;",
            d + 2,
            stride[d],
            dilation[d],
            padding[d]
        );
        let _ = writeln!(
            body,
            "        if (p{d} < 0 || p{d} >= {}LL) continue;",
            a.shape[d + 2]
        );
        in_off.push(format!("p{d} * s0_{}", d + 2));
        w_off.push(format!("k{d} * s1_{}", d + 2));
    }
    let x = load(a.dtype, &format!("in0[{}]", in_off.join(" + ")));
    let y = load(w.dtype, &format!("in1[{}]", w_off.join(" + ")));
    let _ = writeln!(body, "        acc += (u64_t){x} * (u64_t){y};");
    body.push_str("      }\n    }\n");
    let _ = writeln!(body, "    out0[e] = {};", store(outs[0], "(i64_t)acc"));

    let n = numel(out_shape);
    let sig = signature(&name, &params, operands, outs);
    let mut text = element_loop(n);
    text.push_str(&body);
    text.push_str("  }\n");
    vec![Kernel {
        name,
        source: assemble("", &sig, &text),
        launch: Launch::Elements { n, block: 128 },
        params,
    }]
}
