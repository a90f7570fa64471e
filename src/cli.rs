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
        Some(_) => crate::pipeline::run(&parse_pahole_args(&args[1..])?),
        None => Err(Error::Msg(USAGE.into())),
    }
}

const USAGE: &str = "usage: dwarf2btf [-J] [-j[N]|--jobs[=N]] [--btf_features=LIST] \
[--lang_exclude=LIST] [--btf_base FILE] [--btf_encode_detached=OUT] FILE\n       dwarf2btf dump FILE [--base-btf BASE]";

/// Parses pahole's encoding command line (`args` without the program name), the
/// syntax kernel Makefiles use: `[-J] [-j[N]] [--btf_features=LIST]
/// [--lang_exclude=LIST] [--btf_base FILE] [--btf_encode_detached=OUT] FILE`.
/// Long options take their value as `--opt=V` or `--opt V`.
pub fn parse_pahole_args(args: &[OsString]) -> Result<crate::pipeline::Options, Error> {
    use crate::encode::Features;
    let mut input = None;
    let mut btf_base = None;
    let mut detached = None;
    let mut features: Option<Features> = None;
    let mut lang_exclude = Vec::new();
    let mut jobs = 1usize;
    let mut legacy = Features::pahole_defaults();
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
        match key {
            "-J" | "--btf_encode" => {}
            "--btf_features" => features
                .get_or_insert_with(Features::default)
                .add_list(&value(key)?),
            "--lang_exclude" => {
                for name in value(key)?.split(',').filter(|n| !n.is_empty()) {
                    let code = crate::dwarf::lang_code(name).ok_or_else(|| {
                        Error::Msg(format!("--lang_exclude: unknown language '{name}'"))
                    })?;
                    lang_exclude.push(code);
                }
            }
            "--btf_base" => btf_base = Some(PathBuf::from(value(key)?)),
            "--btf_encode_detached" => detached = Some(PathBuf::from(value(key)?)),
            "--jobs" => jobs = parse_jobs(inline.as_deref())?,
            "--btf_encode_force" => legacy.encode_force = true,
            "--btf_gen_floats" => legacy.float = true,
            "--btf_gen_all" => legacy.float = true,
            "--skip_encoding_btf_vars" => legacy.var = false,
            "--skip_encoding_btf_decl_tag" => legacy.decl_tag = false,
            "--skip_encoding_btf_type_tag" => legacy.type_tag = false,
            "--skip_encoding_btf_enum64" => legacy.enum64 = false,
            "--skip_encoding_btf_inconsistent_proto" => legacy.consistent_func = true,
            "--btf_gen_optimized" => legacy.optimized_func = true,
            _ if key.starts_with("-j") => {
                jobs = parse_jobs(Some(&key[2..]).filter(|s| !s.is_empty()))?
            }
            _ if key.starts_with('-') && key.len() > 1 => {
                return Err(Error::Msg(format!("unknown option '{a}'\n{USAGE}")))
            }
            _ => {
                if input.replace(PathBuf::from(arg)).is_some() {
                    return Err(Error::Msg(format!(
                        "more than one input file given\n{USAGE}"
                    )));
                }
            }
        }
    }
    let input = input.ok_or_else(|| Error::Msg(format!("no input file given\n{USAGE}")))?;
    Ok(crate::pipeline::Options {
        input,
        btf_base,
        detached,
        features: features.unwrap_or(legacy),
        lang_exclude,
        jobs,
    })
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

fn dump(args: &[OsString]) -> Result<(), Error> {
    let mut file = None;
    let mut base = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--base-btf" {
            base =
                Some(PathBuf::from(it.next().ok_or_else(|| {
                    Error::Msg("--base-btf needs a file".into())
                })?));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<crate::pipeline::Options, Error> {
        let v: Vec<OsString> = args.iter().map(OsString::from).collect();
        parse_pahole_args(&v)
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
}
