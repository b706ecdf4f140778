//! The text form of traces: Python-like source that parses back into an equal trace.

mod lexer;
mod parse;
pub(crate) mod print;

pub use parse::{parse_literal, parse_trace, parse_trace_with};
pub use print::{
    format_arg, format_call_args, format_literal, print_bsym_lines, print_trace,
    print_trace_positional,
};

use crate::device::Device;
use crate::dtype::DType;
use crate::ir::TensorType;

/// Parses a type annotation such as `cpu f32[8, 16]` or `cuda:0 bf16[] requires_grad`.
pub fn parse_type(text: &str) -> Option<TensorType> {
    let mut words = text.split_whitespace();
    let device = Device::parse(words.next()?)?;
    let rest: Vec<&str> = words.collect();
    let (requires_grad, ty_text) = match rest.last() {
        Some(&"requires_grad") => (true, rest[..rest.len() - 1].join(" ")),
        _ => (false, rest.join(" ")),
    };
    let open = ty_text.find('[')?;
    let dtype = DType::from_short_name(&ty_text[..open])?;
    let dims = ty_text[open..].strip_prefix('[')?.strip_suffix(']')?;
    let shape = if dims.trim().is_empty() {
        Vec::new()
    } else {
        dims.split(',')
            .map(|d| d.trim().parse::<i64>().ok().filter(|&d| d >= 0))
            .collect::<Option<Vec<_>>>()?
    };
    Some(TensorType {
        shape,
        dtype,
        device,
        requires_grad,
    })
}

/// Device literal in trace text: `devices.cpu`, `devices.cuda0`.
pub fn device_literal(d: Device) -> String {
    match d {
        Device::Cpu => "devices.cpu".into(),
        Device::Cuda(i) => format!("devices.cuda{i}"),
    }
}

pub fn parse_device_literal(name: &str) -> Option<Device> {
    let rest = name.strip_prefix("devices.")?;
    if rest == "cpu" {
        return Some(Device::Cpu);
    }
    rest.strip_prefix("cuda")?.parse().ok().map(Device::Cuda)
}
