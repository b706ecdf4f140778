//! ABI versioning. The version is checked twice on load: first through a plain C symbol that
//! never changes shape ([`ENTRY_SYMBOL`]), so a plugin built against another major version is
//! refused with a message naming both versions before any layout is trusted; then by
//! `abi_stable`'s layout check of the root module.

use abi_stable::StableAbi;

/// Semver of the ABI: a new major version breaks plugins, a new minor adds to it compatibly.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbiVersion {
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
}

/// 1.1 added the optional `custom_ops` and `custom_op_meta` root-module fields; 1.2 the
/// executor's `compile_static`, which falls back to `compile` in plugins built against 1.1.
pub const ABI_VERSION: AbiVersion = AbiVersion {
    major: 1,
    minor: 2,
    patch: 0,
};

/// The C symbol every thunder plugin exports: `extern "C" fn() -> u64` returning
/// [`AbiVersion::pack`]. Its presence is what makes a `.so` a thunder plugin.
pub const ENTRY_SYMBOL: &str = "thunder_plugin_abi_version";

impl AbiVersion {
    pub const fn pack(self) -> u64 {
        ((self.major as u64) << 32) | ((self.minor as u64) << 16) | self.patch as u64
    }

    pub const fn unpack(packed: u64) -> AbiVersion {
        AbiVersion {
            major: (packed >> 32) as u16,
            minor: (packed >> 16) as u16,
            patch: packed as u16,
        }
    }

    /// A plugin built against `self` can be loaded by a host at `host` when the majors match
    /// and the plugin does not need a newer minor than the host offers.
    pub fn compatible_with_host(self, host: AbiVersion) -> Result<(), String> {
        if self.major != host.major {
            return Err(format!(
                "plugin ABI version {self} has major version {} but the host's ABI version is {host}",
                self.major
            ));
        }
        if self.minor > host.minor {
            return Err(format!(
                "plugin ABI version {self} needs a newer host than this one (host ABI version {host})"
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for AbiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips() {
        let v = AbiVersion {
            major: 3,
            minor: 7,
            patch: 65535,
        };
        assert_eq!(AbiVersion::unpack(v.pack()), v);
    }

    #[test]
    fn other_major_is_refused_naming_both() {
        let plugin = AbiVersion {
            major: 2,
            minor: 0,
            patch: 0,
        };
        let err = plugin.compatible_with_host(ABI_VERSION).unwrap_err();
        assert!(err.contains("2.0.0") && err.contains("1.2.0"), "{err}");
        let newer_minor = AbiVersion {
            major: 1,
            minor: 9,
            patch: 0,
        };
        assert!(newer_minor.compatible_with_host(ABI_VERSION).is_err());
        let older_minor = AbiVersion {
            major: 1,
            minor: 0,
            patch: 3,
        };
        assert!(older_minor
            .compatible_with_host(AbiVersion {
                major: 1,
                minor: 2,
                patch: 0
            })
            .is_ok());
    }
}
