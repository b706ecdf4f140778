//! What a kernel binary says about itself: the PTX entry's parameters, the ISA version a PTX
//! file needs, the SM a cubin was built for. The package loader checks the manifest against
//! these.

use crate::package::ParamType;

/// PTX ISA version → the CUDA release that introduced it (PTX ISA release notes).
pub fn ptx_isa_min_cuda((major, minor): (u32, u32)) -> (u32, u32) {
    match (major, minor) {
        (9, m) => (13, m),
        (8, m) if m >= 6 => (12, m + 1),
        (8, m) => (12, m),
        (7, m) => (11, m),
        (m, _) if m > 9 => (m + 4, 0),
        _ => (10, 0),
    }
}

/// The SM version a cubin's ELF header names, for the header layout this knows: a 64-bit CUDA
/// ELF (OS ABI 0x33) of ELF ABI version 7, whose `e_flags` low byte is the SM (what
/// `cuobjdump -elf` prints as `sm=90a` for flags 0x5a0d5a). Other layouts return `None` and are
/// not checked here; the driver still refuses a cubin for another arch when it loads it.
pub fn cubin_sm(elf: &[u8]) -> Option<u32> {
    if elf.len() < 0x34 || !elf.starts_with(b"\x7fELF") || elf[4] != 2 || elf[7] != 0x33 {
        return None;
    }
    if elf[8] != 7 {
        return None;
    }
    let flags = u32::from_le_bytes([elf[0x30], elf[0x31], elf[0x32], elf[0x33]]);
    Some(flags & 0xff)
}

/// The number of `.param` entries of `.entry NAME(...)` in PTX text.
pub fn ptx_param_count(ptx: &str, name: &str) -> Option<usize> {
    ptx_param_types(ptx, name).map(|t| t.len())
}

/// The PTX type of each parameter of `.entry NAME(...)` (`u64`, `u32`, `f32`, ...).
pub fn ptx_param_types(ptx: &str, name: &str) -> Option<Vec<String>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let end = rest.find(')')?;
    Some(
        rest[..end]
            .split(".param")
            .skip(1)
            .map(|p| {
                p.split_whitespace()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches('.')
                    .to_string()
            })
            .collect(),
    )
}

/// Whether a PTX parameter of type `ptx` can carry a `ty` (PTX's bit-size classes: a pointer is
/// any 64-bit integer type).
pub fn ptx_type_fits(ty: ParamType, ptx: &str) -> bool {
    match ty {
        ParamType::Ptr(_) | ParamType::I64 | ParamType::U64 => {
            matches!(ptx, "u64" | "s64" | "b64")
        }
        ParamType::I32 | ParamType::U32 => matches!(ptx, "u32" | "s32" | "b32"),
        ParamType::F32 => matches!(ptx, "f32" | "b32"),
        ParamType::F64 => matches!(ptx, "f64" | "b64"),
    }
}
