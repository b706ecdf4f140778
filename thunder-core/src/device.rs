//! Devices: `cpu` and `cuda:N`.

use thunder_abi::{DeviceDesc, DeviceKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    Cuda(u32),
}

impl Device {
    pub fn to_desc(self) -> DeviceDesc {
        match self {
            Device::Cpu => DeviceDesc::CPU,
            Device::Cuda(index) => DeviceDesc {
                kind: DeviceKind::Cuda,
                index,
            },
        }
    }

    pub fn from_desc(desc: DeviceDesc) -> Device {
        match desc.kind {
            DeviceKind::Cpu => Device::Cpu,
            DeviceKind::Cuda => Device::Cuda(desc.index),
        }
    }

    /// Parses `cpu`, `cuda` (device 0) or `cuda:N`.
    pub fn parse(text: &str) -> Option<Device> {
        match text {
            "cpu" => Some(Device::Cpu),
            "cuda" => Some(Device::Cuda(0)),
            _ => text.strip_prefix("cuda:")?.parse().ok().map(Device::Cuda),
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}
