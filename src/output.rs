//! Writing output files atomically: a temporary file in the same folder, then rename,
//! so a failure never leaves a damaged or half-written file behind.

use crate::Error;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically. If `path` exists its permissions are kept.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    write_atomic_gated(path, |f| f.write_all(bytes), || Ok(()))
}

/// Like [`write_atomic`], but `fill` streams the contents into the temporary file (a
/// large output, a rewritten vmlinux, need not be built in memory first), and the new
/// file replaces `path` only if `gate`, called once it is written and synced, says
/// so: a check of the contents can run while they are written. On a refusal the temporary file is removed and `gate`'s
/// error returned. `gate` is not called if the write fails.
pub fn write_atomic_gated(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    gate: impl FnOnce() -> Result<(), Error>,
) -> Result<(), Error> {
    let tmp = temp_path(path);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        fill(&mut f)?;
        if let Ok(meta) = std::fs::metadata(path) {
            f.set_permissions(meta.permissions())?;
        }
        f.sync_all()
    })();
    let result = match written {
        Ok(()) => gate().and_then(|()| std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))),
        Err(e) => Err(Error::io(path, e)),
    };
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `dir/.name.dwarf2btf-PID.tmp`, next to `path` so that the rename stays on one
/// file system.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or("out".into(), |n| n.to_string_lossy());
    path.with_file_name(format!(".{name}.dwarf2btf-{}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("dwarf2btf-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<std::ffi::OsString> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_refusing_gate_leaves_the_old_file_and_no_temporary() {
        let d = dir("gate");
        let out = d.join("out.btf");
        std::fs::write(&out, b"old").unwrap();
        let refused = write_atomic_gated(
            &out,
            |f| f.write_all(b"new"),
            || Err(Error::file(&out, "refused")),
        );
        assert!(refused.unwrap_err().to_string().contains("refused"));
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
        assert_eq!(names(&d), vec![std::ffi::OsString::from("out.btf")]);
        let mut asked = false;
        write_atomic_gated(
            &out,
            |f| f.write_all(b"new"),
            || {
                asked = true;
                Ok(())
            },
        )
        .unwrap();
        assert!(asked);
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        // A failed write does not ask the gate.
        let missing = d.join("no/such/dir/out.btf");
        let failed = write_atomic_gated(
            &missing,
            |f| f.write_all(b"x"),
            || panic!("asked after a failed write"),
        );
        assert!(failed.is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
