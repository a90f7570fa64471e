//! Checks of rewritten ELF files with the binutils: readelf and objdump read them
//! cleanly, objcopy extracts each section's bytes.

use super::run;
use std::path::Path;
use std::process::Command;

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

/// `objcopy --remove-section=.BTF FROM TO`: the file as the kernel build hands it to
/// pahole (or what is left of an output once its `.BTF` is taken out again).
pub fn without_btf(from: &Path, to: &Path) {
    run_clean(
        Command::new("objcopy")
            .arg("--remove-section=.BTF")
            .arg(from)
            .arg(to),
    );
}

/// Section `name` of `elf` as `objcopy --dump-section` writes it, through a file in
/// `dir`.
pub fn dumped_section(elf: &Path, name: &str, dir: &Path) -> Vec<u8> {
    let out = dir.join(format!("dumped{name}"));
    run_clean(
        Command::new("objcopy")
            .arg(format!("--dump-section={name}={}", out.display()))
            .arg(elf)
            .arg(dir.join("scratch")),
    );
    std::fs::read(&out).unwrap()
}
