//! Where an encoding's result goes, as pahole decides it: a detached raw file
//! (`--btf_encode_detached`), or the input ELF's `.BTF` section — with, for split BTF
//! and the `distilled_base` feature, `.BTF` relative to a distilled `.BTF.base`.

use crate::btf::{self, Btf};
use crate::elf::MappedElf;
use crate::pipeline::Options;
use crate::Error;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// Writes the deduplicated BTF `bytes` of `opts.input` (split over `base` when
/// `--btf_base` was given) where `opts` says; `input` is that file as the run mapped
/// it, which a write into the ELF copies. Every write is atomic: on failure the input
/// and any existing output are untouched. The bytes are checked first, as the
/// kernel would check them; with `two_threads`, the check runs on its own threads while
/// the file is written, and the file replaces the old one only once the check passed.
pub fn write_output(
    opts: &Options,
    input: &MappedElf,
    bytes: Vec<u8>,
    base: Option<&Arc<Btf>>,
    two_threads: bool,
) -> Result<(), Error> {
    if !two_threads {
        check_encoded(&opts.input, &bytes, base, false)?;
        return write_checked(opts, input, &bytes, base, || Ok(()));
    }
    std::thread::scope(|scope| {
        let check = scope.spawn(|| check_encoded(&opts.input, &bytes, base, true));
        let check = std::cell::Cell::new(Some(check));
        let verdict = || match check.take() {
            Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            None => Ok(()),
        };
        let written = write_checked(opts, input, &bytes, base, verdict);
        // A write that failed before asking: the check's refusal, if any, is what
        // the user needs to know first.
        verdict().and(written)
    })
}

/// The write of [`write_output`], which replaces the file only if `gate` says so.
fn write_checked(
    opts: &Options,
    input: &MappedElf,
    bytes: &[u8],
    base: Option<&Arc<Btf>>,
    gate: impl FnOnce() -> Result<(), Error>,
) -> Result<(), Error> {
    match (&opts.detached, base) {
        // pahole distils only when it writes into the ELF; a detached file is the
        // plain split BTF.
        (Some(out), _) => crate::output::write_atomic_gated(out, |f| f.write_all(bytes), gate),
        (None, Some(base)) if opts.features.distilled_base => {
            let (split, dist_base) = distill_bytes(bytes, base)
                .map_err(|e| Error::file(&opts.input, format!("distilled base: {e}")))?;
            // pahole adds .BTF, then .BTF.base.
            crate::elf_write::write_sections_into(
                input,
                &[(".BTF", &split), (".BTF.base", &dist_base)],
                None,
                gate,
            )
        }
        // A `.BTF.base` left by an earlier distilled encoding would make the loader
        // read the new `.BTF` (relative to the whole base) as relative to that
        // distilled base: refuse rather than write a module that loads with wrong
        // types.
        (None, _) => crate::elf_write::write_sections_into(
            input,
            &[(".BTF", bytes)],
            Some((".BTF.base", STALE_DISTILLED_BASE)),
            gate,
        ),
    }
}

/// Why a file with a `.BTF.base` does not get a plain `.BTF`.
const STALE_DISTILLED_BASE: &str = "has a .BTF.base section (a distilled base from an \
    earlier encoding) that the new .BTF would not match: add distilled_base to \
    --btf_features, or remove it first (objcopy --remove-section=.BTF.base)";

/// Refuses to write BTF the kernel would reject. Damaged DWARF (a type that refers
/// to itself, a reference outside its unit) can encode to such BTF; failing here
/// names the input instead of leaving a vmlinux or module that will not load. The
/// check costs well under 0.1 s for a whole vmlinux.
fn check_encoded(
    input: &Path,
    bytes: &[u8],
    base: Option<&Arc<Btf>>,
    two_threads: bool,
) -> Result<(), Error> {
    btf::validate::parse_checked_on(bytes, base.cloned(), two_threads).map_err(|e| {
        Error::file(
            input,
            format!("its DWARF encodes to invalid BTF, nothing written: {e}"),
        )
    })?;
    Ok(())
}

/// The split BTF `bytes` (over `base`) rewritten over its distilled base: returns
/// the raw `.BTF` and `.BTF.base` contents.
pub fn distill_bytes(bytes: &[u8], base: &Arc<Btf>) -> Result<(Vec<u8>, Vec<u8>), String> {
    let split = btf::read::parse(bytes, Some(base.clone())).map_err(|e| e.to_string())?;
    let d = crate::distill::distill_base(&split).map_err(|e| e.to_string())?;
    Ok((
        btf::write::to_bytes(&d.split),
        btf::write::to_bytes(&d.base),
    ))
}
