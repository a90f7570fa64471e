//! The command line: subcommands (`dump`, `validate`, `dedup`) and pahole's encoding
//! syntax (anything else).
//!
//! `run` looks at the first argument and hands the rest to one function per mode; each
//! mode parses its own arguments with clap, so adding a mode is one function and one
//! line in `run`.

use crate::btf;
use crate::Error;
use clap::Parser;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

mod pahole;

use pahole::run_pahole;
pub use pahole::{
    parse_pahole_args, parse_pahole_cmdline, EncodeCommand, PaholeCommand, PAHOLE_VERSION,
};

/// The synopsis of every mode.
const USAGE: &str = "usage: dwarf2btf -J [-j[N]|--jobs[=N]] [-V|--verbose] [--btf_features=LIST] \
                     [--btf_features_strict=LIST] [--lang_exclude=LIST] [--btf_base FILE] [--btf_encode_detached=OUT] \
                     [--dedup=auto|incremental|one-shot] [--time] FILE\n       \
                     dwarf2btf -J [OPTIONS] --btf_base BASE MODULE.ko… (many modules, in parallel)\n       \
                     dwarf2btf --version (answers as pahole: v1.32) | --supported_btf_features\n       \
                     dwarf2btf dump FILE [--base-btf BASE] [--no-validate]\n       \
                     dwarf2btf validate FILE [--base-btf BASE]\n       \
                     dwarf2btf dedup IN -o OUT [--base-btf BASE] [--libbpf-1.1]";

/// Runs the command line `args` (program name first); returns the exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(CliError::Usage(e)) => {
            // clap prints help/version to stdout with exit code 0, errors to stderr.
            let _ = e.print();
            e.exit_code()
        }
        Err(CliError::Run(Error::Refused(msg))) => {
            eprintln!("{msg}");
            1
        }
        Err(CliError::Run(e)) => {
            eprintln!("dwarf2btf: error: {e}");
            1
        }
    }
}

/// Why a run failed: a bad command line (clap reports it) or a failed job.
enum CliError {
    Usage(clap::Error),
    Run(Error),
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        CliError::Run(e)
    }
}

impl From<clap::Error> for CliError {
    fn from(e: clap::Error) -> Self {
        CliError::Usage(e)
    }
}

/// Dispatches on the mode (first argument).
fn run(args: Vec<OsString>) -> Result<(), CliError> {
    // Under the name `pahole` (a symlink, or PAHOLE=… in a kernel build) there are no
    // subcommands: everything is pahole's syntax.
    let invoked_as = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    if invoked_as == "pahole" {
        return Ok(run_pahole(&args[1..])?);
    }
    let mode = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    // The mode's own parser sees "dwarf2btf MODE" as its program name.
    let rest = || {
        let mut v = vec![OsString::from(format!("dwarf2btf {mode}"))];
        v.extend(args.iter().skip(2).cloned());
        v
    };
    match mode {
        "dump" => dump(DumpArgs::try_parse_from(rest())?),
        "validate" => validate(ValidateArgs::try_parse_from(rest())?),
        "dedup" => Ok(dedup(&args[2..])?),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        "" => Err(Error::Msg(USAGE.into()).into()),
        // Anything else is pahole's encoding syntax (`-J … FILE`).
        _ => Ok(run_pahole(&args[1..])?),
    }
}

/// `dwarf2btf dump`: print BTF as `bpftool btf dump file` (raw format) does.
#[derive(Parser, Debug)]
#[command(about = "Print BTF exactly as `bpftool btf dump file FILE` does")]
struct DumpArgs {
    /// Raw BTF file, or ELF file with a .BTF section.
    file: PathBuf,
    /// Base BTF of a split BTF (raw file, or ELF file with a .BTF section).
    #[arg(long = "base-btf", short = 'B', value_name = "BASE")]
    base_btf: Option<PathBuf>,
    /// Print BTF that the kernel would refuse too, as bpftool does (for example
    /// the BTF of a BPF object before libbpf fixes it up). The reader's structural
    /// checks still apply.
    #[arg(long)]
    no_validate: bool,
}

/// `dwarf2btf validate`: run the kernel's checks and print every problem.
#[derive(Parser, Debug)]
#[command(about = "Check BTF the way the kernel and libbpf do; exit 1 on any problem")]
struct ValidateArgs {
    /// Raw BTF file, or ELF file with a .BTF section.
    file: PathBuf,
    /// Base BTF of a split BTF.
    #[arg(long = "base-btf", short = 'B', value_name = "BASE")]
    base_btf: Option<PathBuf>,
}

fn dump(a: DumpArgs) -> Result<(), CliError> {
    let base = btf::read::read_base(a.base_btf.as_deref(), !a.no_validate)?;
    let btf = if a.no_validate {
        btf::read::read_file(&a.file, base)?
    } else {
        btf::read::read_file_checked(&a.file, base)?
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let res = btf::dump::dump(&btf, &mut out).and_then(|()| out.flush());
    match res {
        // A closed pipe (`dwarf2btf dump F | head`) is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::Msg(format!("writing the dump: {e}")).into())
        }
        _ => Ok(()),
    }
}

fn validate(a: ValidateArgs) -> Result<(), CliError> {
    let base = btf::read::read_base(a.base_btf.as_deref(), true)?;
    let path = &a.file;
    let btf = btf::read::with_btf_bytes(path, ".BTF", |bytes| {
        let btf = btf::read::parse(bytes, base)?;
        let mut problems = btf::validate::check_layout(bytes);
        problems.extend(btf::validate::validate(&btf));
        Ok((btf, problems))
    })?;
    let (btf, problems) = btf;
    if problems.is_empty() {
        println!(
            "{}: valid BTF, {} types (ids {}..={})",
            path.display(),
            btf.types().len(),
            btf.first_id(),
            btf.type_count()
        );
        return Ok(());
    }
    for p in &problems {
        eprintln!("{}: {p}", path.display());
    }
    Err(Error::file(path, format!("{} problems", problems.len())).into())
}

/// `dwarf2btf dedup IN -o OUT [--base-btf BASE] [--libbpf-1.1]`: libbpf's btf__dedup.
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
        } else if a.to_string_lossy().starts_with('-') && a != "-" {
            // Not taken as the input file name: `dedup --typo IN` must name the typo.
            let a = a.to_string_lossy();
            return Err(Error::Msg(format!("dedup: unknown option {a}; {usage}")));
        } else if input.is_none() {
            input = Some(PathBuf::from(a));
        } else {
            let a = a.to_string_lossy();
            return Err(Error::Msg(format!(
                "dedup: unexpected argument {a}; {usage}"
            )));
        }
    }
    let input = input.ok_or_else(|| Error::Msg(format!("dedup: no input file; {usage}")))?;
    let out = out.ok_or_else(|| Error::Msg(format!("dedup: no output file; {usage}")))?;
    let base = btf::read::read_base(base.as_deref(), false)?;
    let btf = btf::read::read_file(&input, base)?;
    // By value: the input's type model is freed once the dedup has copied it.
    let bytes = crate::dedup::dedup_bytes_owned(btf, compat)
        .map_err(|e| Error::file(&input, e.to_string()))?;
    crate::output::write_atomic(&out, &bytes)
}
