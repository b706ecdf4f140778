//! Loading one plugin library: the entry symbol and ABI version first (a plain C function, so
//! a plugin of another major version is refused before any layout is trusted), then the
//! abi_stable root module with its layout check.

use std::path::Path;
use thunder_abi::abi_stable::library::lib_header_from_path;
use thunder_abi::{AbiVersion, PluginModuleRef, ABI_VERSION, ENTRY_SYMBOL};

/// Outcome of looking at a file that might be a plugin.
pub enum Probe {
    Plugin(AbiVersion),
    /// A loadable library without the thunder entry symbol.
    NotAPlugin,
}

/// Checks that the file holds every segment and section its headers declare. `dlopen` maps a
/// truncated library without complaint and the process dies with SIGBUS on first touch, so a
/// half-copied plugin must be caught here.
fn check_complete(path: &Path) -> Result<(), String> {
    use object::{Object, ObjectSection, ObjectSegment};
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot load library: cannot read: {e}"))?;
    let file = object::File::parse(&*bytes).map_err(|e| {
        // A known object-file magic number that does not parse is a damaged library.
        if object::FileKind::parse(&*bytes).is_ok() {
            format!("cannot load library: truncated or corrupt ({e})")
        } else {
            format!("cannot load library: not a shared library: {e}")
        }
    })?;
    for segment in file.segments() {
        segment
            .data()
            .map_err(|e| format!("cannot load library: truncated or corrupt (segment: {e})"))?;
    }
    for section in file.sections() {
        section.data().map_err(|e| {
            format!(
                "cannot load library: truncated or corrupt (section {}: {e})",
                section.name().unwrap_or("?")
            )
        })?;
    }
    Ok(())
}

pub fn probe(path: &Path) -> Result<Probe, String> {
    check_complete(path)?;
    // SAFETY: loading a library runs its initializers; plugin folders are trusted locations
    // chosen by the user, as for any plugin system that loads native code.
    let lib = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("cannot load library: {e}"))?;
    // SAFETY: the entry symbol's type is fixed forever: `extern "C" fn() -> u64`.
    let entry = unsafe { lib.get::<extern "C" fn() -> u64>(ENTRY_SYMBOL.as_bytes()) };
    match entry {
        Ok(f) => Ok(Probe::Plugin(AbiVersion::unpack(f()))),
        Err(_) => Ok(Probe::NotAPlugin),
    }
}

/// Loads the root module of a library that [`probe`] found to be a plugin of ABI `version`,
/// refusing other ABI major versions and layout mismatches.
pub fn load_module(path: &Path, version: AbiVersion) -> Result<PluginModuleRef, String> {
    version.compatible_with_host(ABI_VERSION)?;
    let header =
        lib_header_from_path(path).map_err(|e| format!("not an abi_stable library: {e}"))?;
    header.init_root_module::<PluginModuleRef>().map_err(|e| {
        let report = e.to_string();
        tracing::debug!(path = %path.display(), "abi_stable's layout report:\n{report}");
        format!(
            "ABI layout check failed: {}; the plugin was built against another thunder-abi \
             (rebuild it against this host's; THUNDER_LOG=debug shows abi_stable's full report)",
            layout_error_summary(&report)
        )
    })
}

/// abi_stable's layout report prints both layouts in full (hundreds of lines) and ends with
/// what differs, in `Error:` paragraphs; those make the message, on one line.
fn layout_error_summary(report: &str) -> String {
    let mut found = Vec::new();
    let mut lines = report.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(first) = line.trim_start().strip_prefix("Error:") else {
            continue;
        };
        let mut part = first.trim().to_string();
        while let Some(next) = lines.peek().map(|l| l.trim()).filter(|l| !l.is_empty()) {
            part.push(' ');
            part.push_str(next);
            lines.next();
        }
        if !found.contains(&part) {
            found.push(part);
        }
    }
    if found.is_empty() {
        report
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string()
    } else {
        found.join("; ")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn layout_errors_are_summarized_on_one_line() {
        let report = "Compared <this>:\n    --- Type Layout ---\n    type:PluginModule\n\n\
                      Error:mismatched package\nExpected:\n    thunder-abi\nFound:\n    other\n\n";
        assert_eq!(
            super::layout_error_summary(report),
            "mismatched package Expected: thunder-abi Found: other"
        );
        assert_eq!(
            super::layout_error_summary("\n  odd error\nmore"),
            "odd error"
        );
    }
}
