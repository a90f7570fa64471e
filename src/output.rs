//! Writing output files atomically: a temporary file in the same folder, then rename,
//! so a failure never leaves a damaged or half-written file behind.

use crate::Error;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically. If `path` exists its permissions are kept.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Like [`write_atomic`], but `fill` streams the contents into the temporary file, so a
/// large output (a rewritten vmlinux) need not be built in memory first.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<(), Error> {
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        fill(&mut f)?;
        if let Ok(meta) = std::fs::metadata(path) {
            f.set_permissions(meta.permissions())?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })
}

/// `dir/.name.dwarf2btf-PID.tmp`, next to `path` so that the rename stays on one
/// file system.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or("out".into(), |n| n.to_string_lossy());
    path.with_file_name(format!(".{name}.dwarf2btf-{}.tmp", std::process::id()))
}
