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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

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

/// One cache entry: filled once, by the first thread that asks for the key; threads that ask
/// meanwhile wait for it (the host compiles regions on several threads, and every layer of a
/// model asks for the same kernels).
type Entry = Arc<OnceLock<Result<Vec<u8>, String>>>;

pub struct Compiler {
    memory: Mutex<HashMap<CacheKey, Entry>>,
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
        self.image_with(key, || {
            let path = self
                .disk
                .as_ref()
                .map(|d| d.join(format!("{}.cubin", key.0)));
            match path.as_ref().and_then(|p| std::fs::read(p).ok()) {
                Some(img) if !img.is_empty() => Ok((img, Origin::Disk)),
                _ => {
                    let img = compile(source, name, arch)?;
                    if let Some(p) = &path {
                        // A failed write only costs a recompile next time.
                        let _ = write_atomically(p, &img);
                    }
                    Ok((img, Origin::Compiled))
                }
            }
        })
    }

    /// The memory cache's entry for `key`, filled by `produce` (disk or NVRTC) if no thread
    /// has filled it yet. A failure is kept too: the same source fails the same way.
    fn image_with(
        &self,
        key: &CacheKey,
        produce: impl FnOnce() -> Result<(Vec<u8>, Origin), String>,
    ) -> Result<(Vec<u8>, Origin), String> {
        let entry = self
            .memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.clone())
            .or_default()
            .clone();
        let mut origin = Origin::Memory;
        let image = entry.get_or_init(|| {
            produce().map(|(img, o)| {
                origin = o;
                img
            })
        });
        image.clone().map(|img| (img, origin))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Unique per process and per write: two threads may write the same entry at once.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
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
    fn threads_asking_for_one_key_at_once_share_one_compile() {
        let compiler = Compiler::new(None);
        let key = CacheKey("k".into());
        let compiles = AtomicU64::new(0);
        let origins: Vec<Origin> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        compiler
                            .image_with(&key, || {
                                compiles.fetch_add(1, Ordering::SeqCst);
                                // Long enough for the other threads to arrive meanwhile.
                                std::thread::sleep(std::time::Duration::from_millis(50));
                                Ok((vec![1, 2, 3], Origin::Compiled))
                            })
                            .map(|(img, o)| {
                                assert_eq!(img, vec![1, 2, 3]);
                                o
                            })
                            .unwrap_or_else(|e| panic!("{e}"))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| panic!("thread panicked")))
                .collect()
        });
        assert_eq!(compiles.load(Ordering::SeqCst), 1);
        assert_eq!(
            origins.iter().filter(|&&o| o == Origin::Compiled).count(),
            1
        );
        assert_eq!(origins.iter().filter(|&&o| o == Origin::Memory).count(), 7);
        // A failure is remembered, not retried.
        let bad = CacheKey("bad".into());
        assert!(compiler
            .image_with(&bad, || Err("nvrtc: error".into()))
            .is_err());
        let again = compiler.image_with(&bad, || Ok((vec![9], Origin::Compiled)));
        assert_eq!(again, Err("nvrtc: error".to_string()));
    }

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
