//! Many modules in one run (`dwarf2btf -J --btf_base vmlinux a.ko b.ko …`), beyond
//! what pahole offers: the base is read once and shared, and the modules are encoded
//! in parallel, one per worker thread. Each module gets exactly the bytes a
//! separate run would write, into its own file, atomically.

use crate::btf::Btf;
use crate::dedup::PreparedBase;
use crate::encode::FuncSkip;
use crate::pipeline::{self, Options};
use crate::Error;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Encodes each of `inputs` as `opts` says (its `input` is ignored), with `workers`
/// modules in flight at a time. Every module is attempted; the error lists those
/// that failed. Returns, input by input, why functions were left out.
pub fn run_many(
    opts: &Options,
    inputs: &[PathBuf],
    workers: usize,
) -> Result<Vec<Vec<FuncSkip>>, Error> {
    if opts.detached.is_some() && inputs.len() > 1 {
        return Err(Error::Msg(
            "--btf_encode_detached names one output file: give one input file".into(),
        ));
    }
    let base = pipeline::load_base(opts)?;
    // Indexing the base for dedup costs as much as a small module: do it once.
    let prepared = match &base {
        Some(b) => Some(
            pipeline::prepare_dedup_base(b.clone())
                .map_err(|e| Error::file(opts.btf_base.as_deref().unwrap_or(&opts.input), e))?,
        ),
        None => None,
    };
    // Largest first, so that no big module starts last while the other workers idle.
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(std::fs::metadata(&inputs[i]).map_or(0, |m| m.len())));
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let skips = Mutex::new(vec![Vec::new(); inputs.len()]);
    let workers = workers.clamp(1, inputs.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    match one(opts, &inputs[i], base.clone(), prepared.as_ref()) {
                        Ok(s) => skips.lock().unwrap_or_else(|p| p.into_inner())[i] = s,
                        Err(e) => failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((i, e)),
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    match failures.len() {
        0 => Ok(skips.into_inner().unwrap_or_else(|p| p.into_inner())),
        1 => Err(failures.remove(0).1),
        n => {
            failures.sort_by_key(|(i, _)| *i);
            let lines: Vec<String> = failures.iter().map(|(_, e)| e.to_string()).collect();
            Err(Error::Msg(format!(
                "{n} of {} inputs failed:\n  {}",
                inputs.len(),
                lines.join("\n  ")
            )))
        }
    }
}

/// One module of the batch: the same steps as [`pipeline::run`], over the shared base.
fn one(
    opts: &Options,
    input: &Path,
    base: Option<Arc<Btf>>,
    prepared: Option<&PreparedBase>,
) -> Result<Vec<FuncSkip>, Error> {
    let opts = Options {
        input: input.to_path_buf(),
        // Modules run side by side; one thread each keeps every core busy.
        jobs: 1,
        ..opts.clone()
    };
    let (btf, skips, elf) = pipeline::encode_input_file(&opts, base.clone())?;
    let bytes = match prepared {
        Some(p) => p
            .dedup_bytes_owned_encoded(btf)
            .map_err(|e| Error::file(&opts.input, format!("dedup: {e}")))?,
        None => pipeline::dedup_output(btf).map_err(|e| Error::file(&opts.input, e))?,
    };
    crate::emit::write_output(&opts, &elf, bytes, base.as_ref(), false)?;
    Ok(skips)
}
