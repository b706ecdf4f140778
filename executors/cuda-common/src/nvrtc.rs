//! Compiling generated source with NVRTC, with caches in memory and on disk.
//!
//! The cache key is the SHA-256 of the source with the target arch, the driver version and the
//! NVRTC version, so a new driver or compiler never reuses an old binary. Disk entries are
//! written to a temporary name and renamed, so concurrent processes never read half a file.

use crate::device::guarded;
use cudarc::nvrtc::{result, sys};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey(pub String);

impl CacheKey {
    pub fn new(source: &str, arch: (i32, i32), driver: i32, nvrtc: (i32, i32)) -> CacheKey {
        let digest = Sha256::digest(source.as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        CacheKey(format!(
            "{hex}-sm{}{}-drv{driver}-nvrtc{}.{}",
            arch.0, arch.1, nvrtc.0, nvrtc.1
        ))
    }
}

/// Where compiled images came from, for logs and the benchmark's cache-hit timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Memory,
    Disk,
    Compiled,
}

pub struct Compiler {
    memory: Mutex<HashMap<CacheKey, Vec<u8>>>,
    disk: Option<PathBuf>,
}

impl Compiler {
    pub fn new(disk: Option<PathBuf>) -> Compiler {
        Compiler {
            memory: Mutex::new(HashMap::new()),
            disk,
        }
    }

    /// The cubin for `source` on `arch`.
    pub fn image(
        &self,
        source: &str,
        name: &str,
        key: &CacheKey,
        arch: (i32, i32),
    ) -> Result<(Vec<u8>, Origin), String> {
        if let Some(img) = self
            .memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
        {
            return Ok((img.clone(), Origin::Memory));
        }
        let path = self
            .disk
            .as_ref()
            .map(|d| d.join(format!("{}.cubin", key.0)));
        let (img, origin) = match path.as_ref().and_then(|p| std::fs::read(p).ok()) {
            Some(img) if !img.is_empty() => (img, Origin::Disk),
            _ => {
                let img = compile(source, name, arch)?;
                if let Some(p) = &path {
                    // A failed write only costs a recompile next time.
                    let _ = write_atomically(p, &img);
                }
                (img, Origin::Compiled)
            }
        };
        self.memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), img.clone());
        Ok((img, origin))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}

/// Default disk cache: `$XDG_CACHE_HOME/thunder/cuda-fuser` or `~/.cache/thunder/cuda-fuser`.
pub fn default_cache_dir() -> Option<PathBuf> {
    cache_dir_for("cuda-fuser")
}

/// A plugin's disk cache: `$XDG_CACHE_HOME/thunder/<plugin>` or `~/.cache/thunder/<plugin>`.
pub fn cache_dir_for(plugin: &str) -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("thunder").join(plugin))
}

/// Compiles to a cubin for the real architecture `sm_XY`.
fn compile(source: &str, name: &str, arch: (i32, i32)) -> Result<Vec<u8>, String> {
    guarded("NVRTC", || {
        let src = CString::new(source).map_err(|e| e.to_string())?;
        let file = CString::new(format!("{name}.cu")).map_err(|e| e.to_string())?;
        let prog = result::create_program(&src, Some(&file))
            .map_err(|e| format!("nvrtcCreateProgram failed: {e:?}"))?;
        let options = [
            format!("--gpu-architecture=sm_{}{}", arch.0, arch.1),
            "--std=c++17".to_string(),
            // IEEE division and square root, no flush-to-zero: results must match the
            // reference interpreter, so no fast-math.
            "--fmad=true".to_string(),
        ];
        // SAFETY: `prog` was just created and is destroyed below.
        let compiled = unsafe { result::compile_program(prog, &options) };
        let out = match compiled {
            Ok(()) => cubin(prog),
            Err(e) => {
                // SAFETY: as above.
                let log = unsafe { result::get_program_log(prog) }
                    .map(|l| {
                        l.iter()
                            .map(|&c| c as u8 as char)
                            .take_while(|&c| c != '\0')
                            .collect::<String>()
                    })
                    .unwrap_or_default();
                Err(format!("NVRTC failed to compile {name}: {e:?}\n{log}"))
            }
        };
        // SAFETY: created above, not destroyed yet.
        let _ = unsafe { result::destroy_program(prog) };
        out
    })
}

fn cubin(prog: sys::nvrtcProgram) -> Result<Vec<u8>, String> {
    let mut size = 0usize;
    // SAFETY: a compiled program; writes one size.
    let status = unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
        return Err(format!("nvrtcGetCUBINSize failed: {status:?}"));
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds `size` bytes.
    let status = unsafe { sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(format!("nvrtcGetCUBIN failed: {status:?}"));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keys_change_with_source_arch_driver_and_compiler() {
        let k = CacheKey::new("a", (9, 0), 13000, (13, 0));
        assert_ne!(k, CacheKey::new("b", (9, 0), 13000, (13, 0)));
        assert_ne!(k, CacheKey::new("a", (8, 0), 13000, (13, 0)));
        assert_ne!(k, CacheKey::new("a", (9, 0), 13010, (13, 0)));
        assert_ne!(k, CacheKey::new("a", (9, 0), 13000, (13, 1)));
        assert_eq!(k, CacheKey::new("a", (9, 0), 13000, (13, 0)));
        assert!(k.0.ends_with("-sm90-drv13000-nvrtc13.0"), "{}", k.0);
    }

    #[test]
    fn disk_writes_land_whole() {
        let dir = std::env::temp_dir().join(format!("thunder-nvrtc-test-{}", std::process::id()));
        let p = dir.join("x.cubin");
        write_atomically(&p, b"abc").expect("write");
        assert_eq!(std::fs::read(&p).expect("read"), b"abc");
        let _ = std::fs::remove_dir_all(dir);
    }
}
