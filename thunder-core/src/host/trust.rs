//! What the host checks before it loads a library: plugins are native code that runs with the
//! user's rights, so a plugin file or folder that other users can write to is refused (anyone
//! who can write there can swap in their own code), the way ssh refuses a private key with
//! loose permissions. `allow_writable_plugins = true` in plugins.toml turns this off. A `sha256`
//! pin on an executor with an explicit `library` is checked here too, before any of the
//! library's code runs.

use super::config::ExecutorConfig;
use std::path::{Path, PathBuf};

/// `Err` with the reason and the fix when `path` is writable by its group or by others.
#[cfg(unix)]
fn check_not_writable(path: &Path, what: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| {
        format!(
            "cannot check the permissions of {what} {}: {e}",
            path.display()
        )
    })?;
    let mode = meta.permissions().mode() & 0o7777;
    let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (false, false) => return Ok(()),
        (true, false) => "its group",
        (false, true) => "others",
        (true, true) => "its group and others",
    };
    Err(format!(
        "refusing to load from {what} {path}: it is writable by {who} (mode {mode:04o}), so \
         another user could replace the code it holds; run `chmod go-w {path}`, or set \
         `allow_writable_plugins = true` in plugins.toml to load it anyway",
        path = path.display()
    ))
}

#[cfg(not(unix))]
fn check_not_writable(_path: &Path, _what: &str) -> Result<(), String> {
    Ok(())
}

/// A plugin folder must not be writable by other users: they could drop a library into it.
pub(super) fn check_folder(dir: &Path) -> Result<(), String> {
    check_not_writable(dir, "plugin folder")
}

/// The library file, and the folder holding it, both as given and with symlinks resolved.
fn check_file(path: &Path) -> Result<(), String> {
    let mut folders: Vec<PathBuf> = Vec::new();
    let mut push_parent = |p: &Path| {
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !folders.contains(&parent) {
            folders.push(parent);
        }
    };
    push_parent(path);
    check_not_writable(path, "plugin file")?;
    if let Ok(real) = path.canonicalize() {
        if real != path {
            check_not_writable(&real, "plugin file")?;
        }
        push_parent(&real);
    }
    folders.iter().try_for_each(|d| check_folder(d))
}

/// Everything to check before `path` is loaded. `pinned` is the listed executor whose
/// `library` it is, with its index in plugins.toml.
pub(super) fn vet(
    path: &Path,
    pinned: Option<(usize, &ExecutorConfig)>,
    allow_writable: bool,
) -> Result<(), String> {
    if !allow_writable {
        check_file(path)?;
    }
    if let Some((i, want)) = pinned.and_then(|(i, cfg)| Some((i, cfg.sha256.as_ref()?))) {
        let got = super::sha256_hex(path)?;
        if !got.eq_ignore_ascii_case(want) {
            return Err(format!(
                "executor[{i}].sha256: library hash {got} does not match the pinned {want}; \
                 it was not loaded"
            ));
        }
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A fresh folder under the system's temp folder, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let p =
                std::env::temp_dir().join(format!("thunder-trust-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir(&p).unwrap();
            TempDir(p)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn writable_files_and_folders_are_refused_with_the_fix() {
        let dir = TempDir::new("writable");
        let lib = dir.path().join("libx.so");
        std::fs::write(&lib, b"").unwrap();
        chmod(dir.path(), 0o755);
        chmod(&lib, 0o755);
        assert_eq!(vet(&lib, None, false), Ok(()));

        chmod(&lib, 0o775);
        let err = vet(&lib, None, false).unwrap_err();
        assert!(
            err.contains("plugin file") && err.contains("its group (mode 0775)"),
            "{err}"
        );
        assert!(
            err.contains(&format!("chmod go-w {}", lib.display())),
            "{err}"
        );
        assert_eq!(vet(&lib, None, true), Ok(()));

        chmod(&lib, 0o755);
        chmod(dir.path(), 0o757);
        let err = vet(&lib, None, false).unwrap_err();
        assert!(
            err.contains("plugin folder") && err.contains("others (mode 0757)"),
            "{err}"
        );
        assert!(check_folder(dir.path()).is_err());
        chmod(dir.path(), 0o700);
    }

    #[test]
    fn a_symlink_is_judged_by_its_target_too() {
        let dir = TempDir::new("symlink");
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let lib = open.join("libx.so");
        std::fs::write(&lib, b"").unwrap();
        chmod(&lib, 0o755);
        chmod(&open, 0o777);
        let link = dir.path().join("liblink.so");
        std::os::unix::fs::symlink(&lib, &link).unwrap();
        let err = vet(&link, None, false).unwrap_err();
        assert!(
            err.contains("plugin folder") && err.contains("0777"),
            "{err}"
        );
        chmod(&open, 0o700);
    }
}
