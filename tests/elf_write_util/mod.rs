//! Shared helpers of the `elf_write_*` tests: temporary folders, the corpus, the
//! reference outputs and the external tools the results are checked with.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A temporary folder removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "dwarf2btf-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
    /// Names of the files in the folder, sorted.
    pub fn listing(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Make read-only test folders removable again.
        let _ =
            std::fs::set_permissions(&self.0, std::os::unix::fs::PermissionsExt::from_mode(0o755));
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The corpus folder, or `None` (with a message) when it is absent.
pub fn corpus() -> Option<PathBuf> {
    let dir = std::env::var_os("DWARF2BTF_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/dwarf2btf-corpus")
        });
    if dir.join("vmlinux").is_file() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: corpus not found at {} (set DWARF2BTF_CORPUS)",
            dir.display()
        );
        None
    }
}

/// The pahole 1.31 reference outputs, or `None` (with a message).
pub fn reference() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for up in ["../shared", "../../shared"] {
        let dir = root.join(up).join("reference/pahole-1.31");
        if dir.join("nf_tables.kernel-flags.btf").is_file() {
            return Some(dir);
        }
    }
    eprintln!("skipping: reference outputs (shared/reference/pahole-1.31) not found");
    None
}

/// Whether `tool` can be run.
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Runs a command; returns (success, stdout, stderr).
pub fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs a command that must succeed without printing warnings; returns stdout.
pub fn run_clean(cmd: &mut Command) -> String {
    let (ok, out, err) = run(cmd);
    assert!(ok, "{cmd:?} failed:\n{err}");
    assert!(err.trim().is_empty(), "{cmd:?} printed on stderr:\n{err}");
    // Tool diagnostics look like "readelf: Warning: ..."; BTF type names may contain
    // the word.
    let diag: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(": Warning:") || l.contains(": warning:") || l.contains(": Error:"))
        .collect();
    assert!(diag.is_empty(), "{cmd:?} printed:\n{}", diag.join("\n"));
    out
}

/// The checks every rewritten ELF must pass: readelf and objdump read it without a
/// word of complaint, and objcopy extracts each section's exact bytes.
pub fn check_elf(path: &Path, sections: &[(&str, &[u8])]) {
    run_clean(Command::new("readelf").arg("-a").arg("-W").arg(path));
    run_clean(Command::new("objdump").arg("-h").arg(path));
    for (name, data) in sections {
        let out = path.with_extension(format!("dump{}", name.replace('.', "_")));
        let dump = |tool: &str| {
            run(Command::new(tool)
                .arg(format!("--dump-section={name}={}", out.display()))
                .arg(path)
                .arg(path.with_extension("objcopy-out")))
        };
        let (mut ok, _, mut err) = dump("objcopy");
        if !ok && err.contains("Unable to recognise the format") {
            // A target GNU binutils was not built for (PowerPC …): LLVM's knows them all.
            (ok, _, err) = dump("llvm-objcopy");
        }
        assert!(
            ok,
            "objcopy --dump-section {name} of {}: {err}",
            path.display()
        );
        let got = std::fs::read(&out).unwrap();
        assert!(
            got == *data,
            "{name} of {} differs from the payload",
            path.display()
        );
        let _ = std::fs::remove_file(&out);
        let _ = std::fs::remove_file(path.with_extension("objcopy-out"));
    }
}

/// One line of `readelf -SW` for section `name`: (index, type, flags, link, info,
/// align, entsize), the fields that must match what objcopy would produce.
pub fn section_fields(
    path: &Path,
    name: &str,
) -> Option<(usize, String, String, String, String, String, String)> {
    let out = run_clean(Command::new("readelf").arg("-SW").arg(path));
    for line in out.lines() {
        let Some(rest) = line.trim_start().strip_prefix('[') else {
            continue;
        };
        let Some((idx, rest)) = rest.split_once(']') else {
            continue;
        };
        let Ok(idx) = idx.trim().parse::<usize>() else {
            continue;
        };
        let cols: Vec<&str> = rest.split_whitespace().collect();
        if cols.first() != Some(&name) {
            continue;
        }
        // name type addr off size es [flg] lk inf al
        let (flags, tail) = if cols.len() == 10 {
            (cols[6], &cols[7..])
        } else {
            ("", &cols[6..])
        };
        return Some((
            idx,
            cols[1].into(),
            flags.into(),
            tail[0].into(),
            tail[1].into(),
            tail[2].into(),
            cols[5].into(),
        ));
    }
    None
}

/// The bytes of section `name`, located with `readelf -SW` and read straight from the
/// file (no 340 MB scratch copy, which `objcopy --dump-section` would write).
pub fn read_section(path: &Path, name: &str) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let out = run_clean(Command::new("readelf").arg("-SW").arg(path));
    let line = out
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == name) && l.contains(']'))
        .unwrap_or_else(|| panic!("no section {name} in {}", path.display()));
    let cols: Vec<&str> = line.split(']').nth(1).unwrap().split_whitespace().collect();
    let off = u64::from_str_radix(cols[3], 16).unwrap();
    let size = usize::from_str_radix(cols[4], 16).unwrap();
    let mut f = std::fs::File::open(path).unwrap();
    f.seek(SeekFrom::Start(off)).unwrap();
    let mut buf = vec![0u8; size];
    f.read_exact(&mut buf).unwrap();
    buf
}
