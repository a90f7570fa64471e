//! The encoding run: ELF → DWARF units → (per unit) arena → encoder → dedup → file.
//!
//! Parsing a unit ([`crate::dwarf::types::parse_cu`]) and encoding it
//! ([`crate::encode::encode_cu`]) are separate steps: a unit's arena is dropped as
//! soon as the unit is encoded, and units are encoded strictly in unit order.

use crate::btf::{self, Btf};
use crate::dwarf::{types::parse_cu, DwarfInput};
use crate::elf::ElfInput;
use crate::encode::{encode_cu, EncoderState, Features, FuncEncoder};
use crate::Error;
use std::path::PathBuf;
use std::sync::Arc;

/// What to encode and where to write it (pahole's `-J` options).
#[derive(Clone, Debug)]
pub struct Options {
    /// The ELF file with DWARF to encode.
    pub input: PathBuf,
    /// `--btf_base`: the base BTF (raw or an ELF's `.BTF`) for split BTF.
    pub btf_base: Option<PathBuf>,
    /// `--btf_encode_detached`: write raw BTF to this file.
    pub detached: Option<PathBuf>,
    /// The features to encode.
    pub features: Features,
    /// DWARF language codes of units to skip (`--lang_exclude`).
    pub lang_exclude: Vec<u16>,
    /// Worker threads (`-j`); the encoding is the same for every value.
    pub jobs: usize,
}

/// Runs one encoding as `pahole -J` does.
pub fn run(opts: &Options) -> Result<(), Error> {
    let base = load_base(opts)?;
    let btf = encode_file_over(opts, base.clone())?;
    let bytes = dedup_output(btf).map_err(|e| Error::file(&opts.input, e))?;
    crate::emit::write_output(opts, bytes, base.as_ref())
}

/// Encodes every type of the input's DWARF into one BTF (before dedup).
pub fn encode_file(opts: &Options) -> Result<Btf, Error> {
    encode_file_over(opts, load_base(opts)?)
}

/// Reads `--btf_base`, if given.
pub fn load_base(opts: &Options) -> Result<Option<Arc<Btf>>, Error> {
    opts.btf_base
        .as_deref()
        .map(|p| read_base(p).map(Arc::new))
        .transpose()
}

/// [`encode_file`] over a base already read (`opts.btf_base` is not read again), so
/// that many modules share one base.
pub fn encode_file_over(opts: &Options, base: Option<Arc<Btf>>) -> Result<Btf, Error> {
    let input = ElfInput::open(&opts.input)?;
    let dw = DwarfInput::new(&input)?;
    let mut state = EncoderState::new(base, opts.features.clone(), input.is_little_endian());
    let mut funcs = new_func_encoder(&input, &opts.features)?;
    for idx in 0..dw.unit_count() {
        let arena = arena::CuArena::new();
        let cu = parse_cu(&dw, idx, arena.bump(), &opts.lang_exclude)?;
        encode_cu(&cu, &mut state).map_err(|e| dw.unit_error(idx, e))?;
        funcs
            .add_cu(&cu, &mut state)
            .map_err(|e| dw.unit_error(idx, e))?;
        // The unit's types are now owned by the BTF; `cu` borrows the arena and ends
        // here, and the arena is freed at once.
        drop(arena);
    }
    funcs
        .finish(&mut state)
        .map_err(|e| Error::file(&opts.input, e.0))?;
    Ok(state.finish())
}

/// The function/variable encoder for `input`: its ELF symbols and, with
/// `decl_tag_kfuncs`, its kfunc sets, read once.
fn new_func_encoder(input: &ElfInput, features: &Features) -> Result<FuncEncoder, Error> {
    let syms = crate::symbols::ElfSymbols::parse(input.path(), input.bytes())?;
    let kfuncs = if features.decl_tag_kfuncs {
        crate::kfuncs::Kfuncs::parse(input.path(), input.bytes())?
    } else {
        crate::kfuncs::Kfuncs::default()
    };
    FuncEncoder::new(Arc::new(syms), kfuncs, features).map_err(Error::Msg)
}

/// Reads the base BTF (raw, or the `.BTF` of an ELF such as vmlinux) through a
/// mapping, so that a large vmlinux is not read whole into memory for its `.BTF`.
fn read_base(path: &std::path::Path) -> Result<Btf, Error> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: read-only private mapping, only read while this function runs.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    let (bytes, _) = btf::read::btf_bytes(&map, ".BTF").map_err(|e| Error::btf(path, e))?;
    btf::read::parse(&bytes, None).map_err(|e| Error::btf(path, e))
}

/// The dedup of [`dedup_output`] with `base` indexed once, for many modules over it.
pub fn prepare_dedup_base(base: Arc<Btf>) -> Result<crate::dedup::PreparedBase, String> {
    crate::dedup::PreparedBase::new(base, crate::dedup::Compat::Upstream)
        .map_err(|e| format!("dedup: {e}"))
}

/// Deduplicates the encoded BTF as pahole's final `btf__dedup` does (current libbpf,
/// the one pahole 1.31's references were made with) and returns the raw bytes to
/// write. Takes the BTF by value so its types are freed as soon as the dedup has
/// copied them.
pub fn dedup_output(btf: Btf) -> Result<Vec<u8>, String> {
    crate::dedup::dedup_bytes_owned_encoded(btf, crate::dedup::Compat::Upstream)
        .map_err(|e| format!("dedup: {e}"))
}
