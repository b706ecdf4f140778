//! Moving a whole program to another device (`thunder run --device cuda:0`).

use super::{Arg, BoundSymbol, Trace};
use crate::device::Device;

fn retarget_bsym(b: &mut BoundSymbol, device: Device) {
    for a in &mut b.args {
        if let Arg::Device(d) = a {
            *d = device;
        }
    }
    for s in &mut b.subsymbols {
        retarget_bsym(s, device);
    }
}

impl Trace {
    /// The same program with every tensor, and every device argument of a factory op, on
    /// `device`. Programs in text name their devices; this lets one file run on either.
    pub fn on_device(&self, device: Device) -> Trace {
        let mut t = self.clone();
        for v in &mut t.values {
            v.ty.device = device;
        }
        for b in &mut t.bsyms {
            retarget_bsym(b, device);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use crate::device::Device;
    use crate::text::parse_trace;

    #[test]
    fn every_value_and_device_literal_moves() {
        let t = parse_trace(
            "def computation(a):\n  # a: \"cpu f32[2]\"\n  t0 = prims.full([2], 1.0, devices.cpu, dtypes.f32)\n  t1 = prims.add(a, t0)\n  return (t1,)\n",
        )
        .expect("parses");
        let moved = t.on_device(Device::Cuda(0));
        assert!(moved.values.iter().all(|v| v.ty.device == Device::Cuda(0)));
        let text = crate::text::print::print_trace(&moved);
        assert!(text.contains("devices.cuda0"), "{text}");
        assert!(!text.contains("devices.cpu"), "{text}");
        assert!(text.contains("cuda:0 f32[2]"), "{text}");
    }
}
