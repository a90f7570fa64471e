//! Where an encoding's result goes, as pahole decides it: a detached raw file
//! (`--btf_encode_detached`), or the input ELF's `.BTF` section — with, for split BTF
//! and the `distilled_base` feature, `.BTF` relative to a distilled `.BTF.base`.

use crate::btf::{self, Btf};
use crate::pipeline::Options;
use crate::Error;
use std::sync::Arc;

/// Writes the deduplicated BTF `bytes` of `opts.input` (split over `base` when
/// `--btf_base` was given) where `opts` says. Every write is atomic: on failure the
/// input and any existing output are untouched.
pub fn write_output(opts: &Options, bytes: Vec<u8>, base: Option<&Arc<Btf>>) -> Result<(), Error> {
    match (&opts.detached, base) {
        // pahole distils only when it writes into the ELF; a detached file is the
        // plain split BTF.
        (Some(out), _) => crate::output::write_atomic(out, &bytes),
        (None, Some(base)) if opts.features.distilled_base => {
            let (split, dist_base) = distill_bytes(&bytes, base)
                .map_err(|e| Error::file(&opts.input, format!("distilled base: {e}")))?;
            // pahole adds .BTF, then .BTF.base.
            crate::elf_write::write_sections_in_place(
                &opts.input,
                &[(".BTF", split), (".BTF.base", dist_base)],
            )
        }
        (None, _) => crate::elf_write::write_sections_in_place(&opts.input, &[(".BTF", bytes)]),
    }
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
