//! The command line: subcommands (`dump`, `dedup`) and pahole's encoding syntax.

use crate::btf;
use crate::Error;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Runs the command line `args` (program name first); returns the exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("dwarf2btf: error: {e}");
            1
        }
    }
}

fn run(args: Vec<OsString>) -> Result<(), Error> {
    let sub = args.get(1).and_then(|a| a.to_str());
    match sub {
        Some("dump") => dump(&args[2..]),
        Some("dedup") => dedup(&args[2..]),
        _ => Err(Error::Msg("usage: dwarf2btf dump FILE [--base-btf BASE]".into())),
    }
}

fn dump(args: &[OsString]) -> Result<(), Error> {
    let mut file = None;
    let mut base = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--base-btf" {
            base = Some(PathBuf::from(it.next().ok_or_else(|| Error::Msg("--base-btf needs a file".into()))?));
        } else {
            file = Some(PathBuf::from(a));
        }
    }
    let file = file.ok_or_else(|| Error::Msg("dump: no file given".into()))?;
    let base = match base {
        Some(b) => Some(Arc::new(btf::read::read_file(&b, None)?)),
        None => None,
    };
    let btf = btf::read::read_file(&file, base)?;
    let mut out = std::io::stdout().lock();
    for (i, t) in btf.types().iter().enumerate() {
        let id = btf.first_id().0 + i as u32;
        if writeln!(out, "[{id}] {} '{}'", t.kind().name(), btf.str_at(t.name)).is_err() {
            break;
        }
    }
    Ok(())
}

/// `dedup IN -o OUT [--base-btf BASE] [--libbpf-1.1]`: deduplicate a BTF file (split
/// over BASE if given) as libbpf's `btf__dedup` does and write the raw result
/// atomically. `--libbpf-1.1` gives Debian 12's libbpf's result instead of current
/// libbpf's.
fn dedup(args: &[OsString]) -> Result<(), Error> {
    let usage = "usage: dwarf2btf dedup IN -o OUT [--base-btf BASE] [--libbpf-1.1]";
    let (mut input, mut out, mut base) = (None, None, None);
    let mut compat = crate::dedup::Compat::Upstream;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .map(PathBuf::from)
                .ok_or_else(|| Error::Msg(format!("dedup: {what} needs a file; {usage}")))
        };
        if a == "-o" {
            out = Some(value("-o")?);
        } else if a == "--base-btf" {
            base = Some(value("--base-btf")?);
        } else if a == "--libbpf-1.1" {
            compat = crate::dedup::Compat::Libbpf1_1;
        } else if input.is_none() {
            input = Some(PathBuf::from(a));
        } else {
            let a = a.to_string_lossy();
            return Err(Error::Msg(format!("dedup: unexpected argument {a}; {usage}")));
        }
    }
    let input = input.ok_or_else(|| Error::Msg(format!("dedup: no input file; {usage}")))?;
    let out = out.ok_or_else(|| Error::Msg(format!("dedup: no output file; {usage}")))?;
    let base = match base {
        Some(b) => Some(Arc::new(btf::read::read_file(&b, None)?)),
        None => None,
    };
    let btf = btf::read::read_file(&input, base)?;
    // By value: the input's type model is freed once the dedup has copied it.
    let bytes = crate::dedup::dedup_bytes_owned(btf, compat)
        .map_err(|e| Error::file(&input, e.to_string()))?;
    crate::output::write_atomic(&out, &bytes)
}
