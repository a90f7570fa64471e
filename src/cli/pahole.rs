//! pahole's command line, as kernel builds use it: parsed in command-line order as
//! pahole's argp parser applies it ([`parse_pahole_cmdline`]), and run: one input as
//! pahole, several as a batch.

use super::USAGE;
use crate::Error;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

/// The version `--version` answers: the pahole release whose output we reproduce.
/// The kernel's `scripts/pahole-version.sh` turns `v1.32` into `132` and picks the
/// flags it passes accordingly. v1.32: every BTF feature of pahole master (the reference build, v1.31 + 38
/// commits, with `layout` and `true_signature`) is implemented and gives its bytes,
/// and kernels ≥ 7.1 pass `layout` only to pahole ≥ 1.32 (README, "Version").
pub const PAHOLE_VERSION: &str = "v1.32";

/// A pahole-syntax command line, parsed.
#[derive(Clone, Debug)]
pub enum PaholeCommand {
    /// `--version`.
    Version,
    /// `--help` (or argp's `-?`).
    Help,
    /// `-J …`: encode.
    Encode(EncodeCommand),
    /// `--supported_btf_features`.
    SupportedFeatures,
    /// `--numeric_version`.
    NumericVersion,
}

/// An encoding command line (`-J …`): encode `inputs` (more than one only without
/// `--btf_encode_detached`).
#[derive(Clone, Debug)]
pub struct EncodeCommand {
    /// The options; `input` is the first input file.
    pub opts: crate::pipeline::Options,
    /// Every input file, in command-line order.
    pub inputs: Vec<PathBuf>,
    /// Whether `-j`/`--jobs` was given (a batch otherwise uses every core).
    pub jobs_given: bool,
    /// `--dedup=MODE` (dwarf2btf's own option): how the dedup is reached.
    pub dedup: crate::pipeline::DedupMode,
    /// `-V`/`--verbose`: print the functions left out and why, as pahole does.
    pub verbose: bool,
    /// `--time` (dwarf2btf's own option): print where the time went, on stderr.
    pub time: bool,
    /// What pahole prints on stderr while it reads the command line (features
    /// ignored, under `--verbose`).
    pub notes: Vec<String>,
}

/// pahole options that do something other than encode BTF (pretty-printing, CTF …),
/// for a clear refusal: one a line, the short option (`-` if none), the long one,
/// what it does.
const NOT_ENCODING: &str = "\
-C --class_name show a type
-E --expand_types expand types when printing
-F --format_path choose the debug format to read
-s --sizes print type sizes
-S --show_reorg_steps show struct reorganization
-R --reorganize reorganize structs
-H --holes print structs with holes
-I --show_decl_info print declaration info
-a --anon_include include anonymous types
-A --nested_anon_include include nested anonymous types
-d --recursive print nested structs
-D --decl_exclude exclude declarations
-e --expand_pointers expand pointers
-f --find_pointers_to find pointers to a type
-i --contains find containing types
-l --show_first_biggest_size_base_type_member print member sizes
-m --nr_methods count methods
-M --show_only_data_members print data members only
-n --nr_members count members
-N --class_name_len print name lengths
-O --dwarf_offset print a DWARF offset
-P --packable print packable structs
-r --rel_offset print relative offsets
-t --separator set the field separator
-T --nr_definitions count definitions
-u --defined_in print where types are defined
-x --exclude exclude types
-X --cu_exclude exclude units
-y --prefix_filter filter types by prefix
-z --hex print offsets in hex
-Z --ctf_encode encode CTF
- --structs print structs
- --prettify pretty-print raw data
- --show_private_classes print private classes
- --fixup_silly_bitfields fix bitfields when printing";

/// The refusal of a pahole option that does not encode BTF, or None if `key` is
/// not one.
fn not_encoding(key: &str) -> Option<String> {
    let (short, long, what) = NOT_ENCODING
        .lines()
        .filter_map(|l| {
            let mut words = l.splitn(3, ' ');
            Some((words.next()?, words.next()?, words.next()?))
        })
        .find(|&(s, l, _)| {
            (s != "-" && (key == s || (key.starts_with(s) && key.len() > 2))) || key == l
        })?;
    let name = if short == "-" {
        long.to_string()
    } else {
        format!("{short}/{long}")
    };
    Some(format!(
        "pahole option '{key}' ({name}: {what}) is not supported: dwarf2btf implements \
         only pahole's BTF encoding (-J)"
    ))
}

/// Parses pahole's command line (`args` without the program name), the syntax
/// kernel Makefiles use from 5.x to 6.18: `-J [-j[N]] [--btf_features=LIST]
/// [--lang_exclude=LIST] [--btf_base FILE] [--btf_encode_detached=OUT]
/// [legacy --skip_encoding_btf_* / --btf_gen_* switches] FILE…`, or `--version`.
/// Long options take their value as `--opt=V` or `--opt V`.
pub fn parse_pahole_cmdline(args: &[OsString]) -> Result<PaholeCommand, Error> {
    let mut inputs = Vec::new();
    let mut btf_base = None;
    let mut detached = None;
    let mut features = crate::encode::FeatureArgs::new();
    let mut lang_exclude = Vec::new();
    let mut jobs = 1usize;
    let mut jobs_given = false;
    let mut dedup = crate::pipeline::DedupMode::Auto;
    let mut encode = false;
    let mut verbose = false;
    let mut time = false;
    let mut numeric_version = false;
    let mut notes = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let a = arg
            .to_str()
            .ok_or_else(|| Error::Msg(format!("argument {arg:?} is not valid UTF-8")))?;
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
            _ => (a, None),
        };
        let mut value = |what: &str| -> Result<String, Error> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .and_then(|v| v.to_str())
                    .map(str::to_string)
                    .ok_or_else(|| Error::Msg(format!("{what} needs a value"))),
            }
        };
        // Options are applied in command-line order, as pahole's argp parser does:
        // a switch before the first feature list is undone by it, one after it is not.
        match key {
            "--version" => return Ok(PaholeCommand::Version),
            "--help" | "-?" => return Ok(PaholeCommand::Help),
            "--supported_btf_features" => return Ok(PaholeCommand::SupportedFeatures),
            "--numeric_version" => numeric_version = true,
            "-V" | "--verbose" => verbose = true,
            "--time" => time = true,
            "-J" | "--btf_encode" => encode = true,
            "--btf_features" | "--btf_features_strict" => {
                let strict = key == "--btf_features_strict";
                feature_list(&mut features, &value(key)?, strict, verbose, &mut notes)?
            }
            // pahole implements it as the list `all`, a name it does not know: every
            // feature ends up off.
            "--btf_gen_all" => feature_list(&mut features, "all", false, verbose, &mut notes)?,
            "--lang_exclude" => {
                for name in value(key)?.split(',').filter(|n| !n.is_empty()) {
                    let code = crate::dwarf::lang_code(name).ok_or_else(|| {
                        Error::Msg(format!("--lang_exclude: unknown language '{name}'"))
                    })?;
                    lang_exclude.push(code);
                }
            }
            "--btf_base" => btf_base = Some(PathBuf::from(value(key)?)),
            // As in pahole, a detached output implies -J.
            "--btf_encode_detached" => {
                detached = Some(PathBuf::from(value(key)?));
                encode = true;
            }
            "--jobs" => {
                jobs = parse_jobs(inline.as_deref())?;
                jobs_given = true;
            }
            "--dedup" => {
                dedup = crate::pipeline::DedupMode::parse(&value(key)?).map_err(Error::Msg)?
            }
            // pahole's switches from before --btf_features (1.18 … 1.25), each
            // setting the feature pahole maps it to.
            "--btf_encode_force" => features.features_mut().encode_force = true,
            "--btf_gen_floats" => features.features_mut().float = true,
            "--btf_gen_optimized" => features.features_mut().optimized_func = true,
            "--skip_encoding_btf_vars" => features.features_mut().var = false,
            "--skip_encoding_btf_decl_tag" => features.features_mut().decl_tag = false,
            "--skip_encoding_btf_type_tag" => features.features_mut().type_tag = false,
            "--skip_encoding_btf_enum64" => features.features_mut().enum64 = false,
            "--skip_encoding_btf_inconsistent_proto" => {
                features.features_mut().consistent_func = true
            }
            "--reproducible_build" => features.features_mut().reproducible_build = true,
            "--btf_attributes" => features.features_mut().attributes = true,
            // Short switches bundled as argp takes them (`-JV`).
            _ if key.len() > 2
                && !key.starts_with("--")
                && key[1..].chars().all(|c| c == 'J' || c == 'V') =>
            {
                encode |= key.contains('J');
                verbose |= key.contains('V');
            }
            _ if key.starts_with("-j") && !key.starts_with("--") => {
                jobs = parse_jobs(Some(&key[2..]).filter(|s| !s.is_empty()))?;
                jobs_given = true;
            }
            _ if key.starts_with('-') && key.len() > 1 => {
                return Err(Error::Msg(
                    not_encoding(key).unwrap_or_else(|| format!("unknown option '{a}'\n{USAGE}")),
                ))
            }
            _ => inputs.push(PathBuf::from(arg)),
        }
    }
    if numeric_version {
        return Ok(PaholeCommand::NumericVersion);
    }
    if !encode {
        return Err(Error::Msg(format!(
            "without -J pahole pretty-prints types; dwarf2btf only encodes BTF: add -J \
             (or --btf_encode_detached=OUT)\n{USAGE}"
        )));
    }
    let input = inputs
        .first()
        .cloned()
        .ok_or_else(|| Error::Msg(format!("no input file given\n{USAGE}")))?;
    if detached.is_some() && inputs.len() > 1 {
        return Err(Error::Msg(format!(
            "--btf_encode_detached writes one file: give one input file\n{USAGE}"
        )));
    }
    // Refused here, before any input is opened, rather than dropped: a batch of
    // modules is deduplicated one-shot, module by module.
    if dedup == crate::pipeline::DedupMode::Incremental && inputs.len() > 1 {
        return Err(Error::Msg(format!(
            "--dedup=incremental takes one input file (a batch of modules is \
             deduplicated one-shot)\n{USAGE}"
        )));
    }
    Ok(PaholeCommand::Encode(EncodeCommand {
        opts: crate::pipeline::Options {
            input,
            btf_base,
            detached,
            features: features.finish(),
            lang_exclude,
            jobs,
        },
        inputs,
        jobs_given,
        dedup,
        verbose,
        time,
        notes,
    }))
}

/// One feature list; under `--verbose` (given before it), pahole's note of each
/// name ignored.
fn feature_list(
    features: &mut crate::encode::FeatureArgs,
    list: &str,
    strict: bool,
    verbose: bool,
    notes: &mut Vec<String>,
) -> Result<(), Error> {
    let ignored = features
        .btf_features(list, strict)
        .map_err(|e| Error::Refused(e.to_string()))?;
    if verbose {
        notes.extend(
            ignored
                .into_iter()
                .map(|n| format!("Ignoring unsupported feature '{n}'")),
        );
    }
    Ok(())
}

/// Parses a pahole encoding command line for exactly one input file (see
/// [`parse_pahole_cmdline`]).
pub fn parse_pahole_args(args: &[OsString]) -> Result<crate::pipeline::Options, Error> {
    match parse_pahole_cmdline(args)? {
        PaholeCommand::Encode(e) if e.inputs.len() == 1 => Ok(e.opts),
        PaholeCommand::Encode(_) => Err(Error::Msg(format!(
            "more than one input file given\n{USAGE}"
        ))),
        _ => Err(Error::Msg(format!("not an encoding command line\n{USAGE}"))),
    }
}

/// Runs a pahole-syntax command line: one input as pahole, several as a batch.
pub(super) fn run_pahole(args: &[OsString]) -> Result<(), Error> {
    match parse_pahole_cmdline(args)? {
        PaholeCommand::Version => println!("{PAHOLE_VERSION}"),
        PaholeCommand::NumericVersion => println!("{}", PAHOLE_VERSION[1..].replace('.', "")),
        PaholeCommand::Help => println!("{USAGE}"),
        PaholeCommand::SupportedFeatures => println!("{}", crate::encode::supported_list()),
        PaholeCommand::Encode(cmd) => run_encode(&cmd)?,
    }
    Ok(())
}

/// Runs an encoding command line: one input as pahole, several as a batch.
fn run_encode(cmd: &EncodeCommand) -> Result<(), Error> {
    for n in &cmd.notes {
        eprintln!("{n}");
    }
    // One run per process: its figures live as long as the process.
    let timings: Option<&'static crate::timing::Timings> =
        cmd.time.then(|| &*Box::leak(Box::default()));
    let skips = if cmd.inputs.len() == 1 {
        let tuning = crate::pipeline::Tuning {
            dedup: cmd.dedup,
            timings,
            ..Default::default()
        };
        vec![crate::pipeline::run_tuned(&cmd.opts, &tuning)?]
    } else {
        let workers = if cmd.jobs_given {
            cmd.opts.jobs
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        };
        // Many modules in parallel: only the run's total is timed.
        crate::batch::run_many(&cmd.opts, &cmd.inputs, workers)?
    };
    if let Some(t) = timings {
        eprint!("{}", t.report());
    }
    // pahole prints these on stdout; nothing else goes there.
    if cmd.verbose {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for s in skips.iter().flatten() {
            if let Err(e) = writeln!(out, "{s}") {
                return Err(Error::Msg(format!("writing to stdout: {e}")));
            }
        }
        out.flush()
            .map_err(|e| Error::Msg(format!("writing to stdout: {e}")))?;
    }
    Ok(())
}

/// `-j` / `--jobs` value: absent means one per CPU, as pahole.
fn parse_jobs(v: Option<&str>) -> Result<usize, Error> {
    match v {
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
        Some(s) => match s.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(Error::Msg(format!("bad job count '{s}'"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::encode::Features;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn parse(args: &[&str]) -> Result<crate::pipeline::Options, Error> {
        parse_pahole_args(&os(args))
    }

    fn cmdline(args: &[&str]) -> Result<PaholeCommand, Error> {
        parse_pahole_cmdline(&os(args))
    }

    #[test]
    fn kernel_makefile_syntax() {
        let o = parse(&[
            "-J",
            "-j2",
            "--btf_features=encode_force,var,float,enum64,decl_tag,type_tag,optimized_func,consistent_func,decl_tag_kfuncs,future_thing",
            "--lang_exclude=rust",
            "--btf_base",
            "vmlinux",
            "--btf_encode_detached=out.btf",
            "mod.ko",
        ])
        .unwrap();
        assert_eq!(o.jobs, 2);
        assert!(o.features.float && o.features.enum64 && !o.features.global_var);
        assert_eq!(o.lang_exclude, vec![0x1c]);
        assert_eq!(o.btf_base.as_deref(), Some(std::path::Path::new("vmlinux")));
        assert_eq!(o.detached.as_deref(), Some(std::path::Path::new("out.btf")));
        assert_eq!(o.input, PathBuf::from("mod.ko"));
    }

    #[test]
    fn defaults_and_errors() {
        let o = parse(&["-J", "--jobs=3", "vmlinux"]).unwrap();
        assert_eq!(o.jobs, 3);
        assert!(!o.features.float && o.features.enum64 && o.features.var);
        assert!(parse(&["-J", "-j"]).is_err()); // no input
        assert!(parse(&["-J", "--bogus", "x"]).is_err());
        assert!(parse(&["-J", "-j0", "x"]).is_err());
        assert!(parse(&["--lang_exclude=klingon", "x"]).is_err());
        assert!(parse(&["a", "b"]).is_err());
    }

    #[test]
    fn legacy_switches_map_to_features() {
        let o = parse(&[
            "-J",
            "--skip_encoding_btf_vars",
            "--btf_gen_floats",
            "--skip_encoding_btf_decl_tag",
            "--skip_encoding_btf_type_tag",
            "--skip_encoding_btf_enum64",
            "--skip_encoding_btf_inconsistent_proto",
            "--btf_gen_optimized",
            "--btf_encode_force",
            "--reproducible_build",
            "x",
        ])
        .unwrap();
        let f = &o.features;
        assert!(!f.var && f.float && !f.decl_tag && !f.type_tag && !f.enum64);
        assert!(f.consistent_func && f.optimized_func && f.encode_force);
        assert!(f.reproducible_build && !f.distilled_base);
        // The first --btf_features turns off what came before it, not what follows.
        let o = parse(&["-J", "--reproducible_build", "--btf_features=var", "x"]).unwrap();
        assert!(o.features.var && !o.features.reproducible_build && !o.features.enum64);
        let o = parse(&["-J", "--btf_features=var", "--reproducible_build", "x"]).unwrap();
        assert!(o.features.var && o.features.reproducible_build);
        let o = parse(&["-J", "--btf_features=var", "--skip_encoding_btf_vars", "x"]).unwrap();
        assert!(!o.features.var);
        // pahole's --btf_gen_all is the list `all`, which it does not know.
        let f = parse(&["-J", "--btf_gen_all", "x"]).unwrap().features;
        assert_eq!(f, Features::default());
        let f = parse(&["-J", "--btf_gen_all", "--btf_gen_floats", "x"]).unwrap();
        assert_eq!(f.features.names(), ["float"]);
        // Makefile.btf gives modules a second list (`--btf_features=distilled_base`).
        let o = parse(&[
            "-J",
            "--btf_features=var",
            "--btf_features",
            "distilled_base",
            "x",
        ]);
        let f = o.unwrap().features;
        assert!(f.var && f.distilled_base && !f.float);
    }

    #[test]
    fn strict_lists_verbose_and_probes() {
        let e = cmdline(&["-J", "--btf_features_strict=var,nope", "x"]).unwrap_err();
        assert!(
            matches!(&e, Error::Refused(m) if m.starts_with("Feature 'nope' in 'var,nope' is not supported.")),
            "{e}"
        );
        assert!(cmdline(&["-J", "--btf_features_strict=var,default", "x"]).is_ok());
        // Ignored names are noted under --verbose given before the list only.
        match cmdline(&["-J", "--btf_features=a", "-V", "--btf_features=b,var", "x"]).unwrap() {
            PaholeCommand::Encode(e) => {
                assert!(e.verbose && e.opts.features.var);
                assert_eq!(e.notes, ["Ignoring unsupported feature 'b'"]);
            }
            other => panic!("{other:?}"),
        }
        match cmdline(&["-JV", "x"]).unwrap() {
            PaholeCommand::Encode(e) => assert!(e.verbose),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            cmdline(&["--supported_btf_features"]),
            Ok(PaholeCommand::SupportedFeatures)
        ));
        assert!(matches!(
            cmdline(&["--numeric_version", "-J", "x"]),
            Ok(PaholeCommand::NumericVersion)
        ));
    }

    #[test]
    fn version_batch_and_refusals() {
        assert!(matches!(
            cmdline(&["--version"]),
            Ok(PaholeCommand::Version)
        ));
        assert!(matches!(cmdline(&["--help"]), Ok(PaholeCommand::Help)));
        let batch = cmdline(&["-J", "--btf_base", "vmlinux", "a.ko", "b.ko"]).unwrap();
        let PaholeCommand::Encode(e) = &batch else {
            panic!("{batch:?}")
        };
        assert_eq!(e.inputs, [PathBuf::from("a.ko"), PathBuf::from("b.ko")]);
        assert_eq!(e.opts.input, PathBuf::from("a.ko"));
        assert!(e.notes.is_empty());
        assert!(!e.verbose && !e.time, "{batch:?}");
        assert!(!e.jobs_given, "{batch:?}");
        assert_eq!(e.dedup, crate::pipeline::DedupMode::Auto);
        match cmdline(&["-J", "--dedup=one-shot", "a.ko"]).unwrap() {
            PaholeCommand::Encode(e) => {
                assert_eq!(e.dedup, crate::pipeline::DedupMode::OneShot)
            }
            other => panic!("{other:?}"),
        }
        assert!(cmdline(&["-J", "--dedup=sometimes", "a.ko"]).is_err());
        let e = cmdline(&[
            "-J",
            "--dedup=incremental",
            "--btf_base",
            "v",
            "a.ko",
            "b.ko",
        ]);
        assert!(e.unwrap_err().to_string().contains("one input file"));
        assert!(parse(&["-J", "a.ko", "b.ko"]).is_err());
        assert!(cmdline(&["--btf_encode_detached=o", "a", "b"]).is_err());
        // A detached output implies -J, as in pahole.
        assert!(parse(&["--btf_encode_detached=o", "a"]).is_ok());
        let e = cmdline(&["-J", "-Ctask_struct", "x"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--class_name") && e.contains("not supported"),
            "{e}"
        );
        let e = cmdline(&["x"]).unwrap_err().to_string();
        assert!(e.contains("add -J"), "{e}");
    }
}
