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
