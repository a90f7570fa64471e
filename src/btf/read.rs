//! Reading raw BTF, and the `.BTF` section of ELF files, into a [`Btf`].
//!
//! The reader checks the structure it needs to parse safely (header, section bounds,
//! record lengths, known kinds, reserved bits); the semantic checks the kernel makes
//! are the validator's.

use super::*;
use std::fmt;
use std::path::Path;

/// The BTF magic number.
pub const BTF_MAGIC: u16 = 0xeb9f;
/// The BTF version we read and write.
pub const BTF_VERSION: u8 = 1;
/// Size of the classic BTF header.
pub const HEADER_LEN: usize = 24;
/// End of the header's `layout_off`/`layout_len` words (libbpf ≥ 1.8).
pub const LAYOUT_WORDS_END: usize = 32;

/// Why a BTF blob could not be read or is not valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BtfError {
    /// The data ends before a structure it must hold.
    Truncated(String),
    /// The magic number is wrong.
    BadMagic(u16),
    /// The version is not 1.
    BadVersion(u8),
    /// A header field is out of range.
    BadHeader(String),
    /// A type record is malformed; `id` is the type id.
    BadType {
        /// Id of the offending type.
        id: u32,
        /// What is wrong.
        what: String,
    },
    /// The string section is malformed.
    BadStrings(String),
    /// The file is not BTF or has no `.BTF` section.
    NotBtf(String),
    /// The validator found problems (at least one).
    Invalid(Vec<super::validate::Problem>),
}

impl fmt::Display for BtfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BtfError::Truncated(what) => write!(f, "truncated BTF: {what}"),
            BtfError::BadMagic(m) => write!(f, "bad BTF magic {m:#06x} (expected 0xeb9f)"),
            BtfError::BadVersion(v) => write!(f, "unsupported BTF version {v}"),
            BtfError::BadHeader(what) => write!(f, "bad BTF header: {what}"),
            BtfError::BadType { id, what } => write!(f, "bad BTF type [{id}]: {what}"),
            BtfError::BadStrings(what) => write!(f, "bad BTF string section: {what}"),
            BtfError::NotBtf(what) => write!(f, "{what}"),
            BtfError::Invalid(problems) => {
                write!(f, "invalid BTF: ")?;
                match problems.as_slice() {
                    [] => write!(f, "(no problem recorded)"),
                    [one] => write!(f, "{one}"),
                    [first, rest @ ..] => {
                        write!(f, "{first} (and {} more problems)", rest.len())
                    }
                }
            }
        }
    }
}

impl std::error::Error for BtfError {}

fn bad_type(id: u32, what: impl Into<String>) -> BtfError {
    BtfError::BadType {
        id,
        what: what.into(),
    }
}

/// A cursor over little- or big-endian words.
struct Words<'a> {
    data: &'a [u8],
    pos: usize,
    endian: Endian,
}

impl Words<'_> {
    fn u32(&mut self) -> Option<u32> {
        let b: [u8; 4] = self.data.get(self.pos..self.pos + 4)?.try_into().ok()?;
        self.pos += 4;
        Some(match self.endian {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        })
    }
}

/// Parses a raw BTF blob. `base` is required for split BTF (ids and string offsets
/// continue the base's) and must be None otherwise.
pub fn parse(data: &[u8], base: Option<Arc<Btf>>) -> Result<Btf, BtfError> {
    parse_with_room(data, base, 0)
}

/// [`parse`], with room for `more` types to be added after those of `data`
/// (reserved, not touched, until they come).
pub fn parse_with_room(data: &[u8], base: Option<Arc<Btf>>, more: usize) -> Result<Btf, BtfError> {
    if data.len() < HEADER_LEN {
        return Err(BtfError::Truncated(format!(
            "{} bytes, shorter than the {HEADER_LEN}-byte header",
            data.len()
        )));
    }
    let endian = match [data[0], data[1]] {
        [0x9f, 0xeb] => Endian::Little,
        [0xeb, 0x9f] => Endian::Big,
        _ => return Err(BtfError::BadMagic(u16::from_le_bytes([data[0], data[1]]))),
    };
    if let Some(b) = &base {
        if b.endian() != endian {
            return Err(BtfError::BadHeader(
                "byte order differs from the base BTF".into(),
            ));
        }
    }
    if data[2] != BTF_VERSION {
        return Err(BtfError::BadVersion(data[2]));
    }
    if data[3] != 0 {
        return Err(BtfError::BadHeader(format!(
            "flags {:#x} are not 0",
            data[3]
        )));
    }
    let mut w = Words {
        data,
        pos: 4,
        endian,
    };
    let mut next = || w.u32().expect("header length checked");
    let hdr_len = next() as usize;
    let (type_off, type_len, str_off, str_len) = (next(), next(), next(), next());
    if hdr_len < HEADER_LEN || hdr_len > data.len() {
        return Err(BtfError::BadHeader(format!(
            "header length {hdr_len} (file is {} bytes)",
            data.len()
        )));
    }
    if !hdr_len.is_multiple_of(4) {
        return Err(BtfError::BadHeader(format!(
            "header length {hdr_len} is not 4-aligned"
        )));
    }
    let mut header_extra = data[HEADER_LEN..hdr_len].to_vec();
    // The layout words of libbpf ≥ 1.8. With a layout section the writer writes
    // them again from it; without one (length 0) libbpf ignores the offset, which
    // is kept as it is.
    let (layout_off, layout_len) = if hdr_len >= LAYOUT_WORDS_END {
        let mut w = Words {
            data: &data[HEADER_LEN..],
            pos: 0,
            endian,
        };
        let words = (w.u32().unwrap_or(0), w.u32().unwrap_or(0));
        if words.1 != 0 {
            header_extra[..LAYOUT_WORDS_END - HEADER_LEN].fill(0);
        }
        words
    } else {
        (0, 0)
    };
    let known = header_extra.len().min(LAYOUT_WORDS_END - HEADER_LEN);
    if header_extra[known..].iter().any(|&b| b != 0) {
        // libbpf accepts a longer header only if the bytes it does not know are zero.
        return Err(BtfError::BadHeader(format!(
            "unknown non-zero fields past the {LAYOUT_WORDS_END}-byte header"
        )));
    }
    let body = &data[hdr_len..];
    let section = |off: u32, len: u32, what: &str| -> Result<&[u8], BtfError> {
        let end = (off as u64) + (len as u64);
        if end > body.len() as u64 {
            return Err(BtfError::Truncated(format!(
                "{what} section {off}+{len} ends past the data ({} bytes after the header)",
                body.len()
            )));
        }
        // Both within `body`, a slice: checked just above.
        #[allow(clippy::cast_possible_truncation)]
        let range = off as usize..end as usize;
        Ok(&body[range])
    };
    let type_data = section(type_off, type_len, "type")?;
    let str_data = section(str_off, str_len, "string")?;
    if type_off % 4 != 0 {
        return Err(BtfError::BadHeader(format!(
            "type section offset {type_off} is not 4-aligned"
        )));
    }
    let (t_lo, t_hi) = (type_off as u64, type_off as u64 + type_len as u64);
    let (s_lo, s_hi) = (str_off as u64, str_off as u64 + str_len as u64);
    if t_lo < s_hi && s_lo < t_hi {
        return Err(BtfError::BadHeader(
            "type and string sections overlap".into(),
        ));
    }
    check_strings(str_data, base.is_some())?;
    // libbpf's checks of the layout section: 4-aligned, whole records, between the
    // type and the string sections.
    let layout = if layout_len == 0 {
        None
    } else {
        let data = section(layout_off, layout_len, "kind layout")?;
        if layout_off % 4 != 0 || !(layout_len as usize).is_multiple_of(layout::RECORD_LEN) {
            return Err(BtfError::BadHeader(format!(
                "kind layout section {layout_off}+{layout_len} is not made of 4-aligned records"
            )));
        }
        if (layout_off as u64) < t_hi || layout_off as u64 + layout_len as u64 > s_lo {
            return Err(BtfError::BadHeader(format!(
                "kind layout section {layout_off}+{layout_len} is not between the type and \
                 string sections"
            )));
        }
        Some(layout::parse(data, endian))
    };

    // Room for the most types the section can hold (a record takes 12 bytes or
    // more): grown by doubling, a vmlinux's 110,000 types were copied into fresh
    // pages at each step; room never used is never touched.
    let types = Vec::with_capacity(type_data.len() / 12 + more);
    let mut btf = Btf::from_parts(base, types, str_data.to_vec(), endian);
    btf.set_header_extra(header_extra);
    btf.set_layout(layout);
    let mut w = Words {
        data: type_data,
        pos: 0,
        endian,
    };
    while w.pos < type_data.len() {
        let id = btf.type_count() + 1;
        let t = parse_type(&mut w, id)?;
        btf.push_type(t);
    }
    Ok(btf)
}

/// The string section must end with a NUL; a base's must start with one (offset 0 is
/// the empty name). A split BTF's may be empty.
fn check_strings(strs: &[u8], split: bool) -> Result<(), BtfError> {
    if strs.is_empty() {
        return if split {
            Ok(())
        } else {
            Err(BtfError::BadStrings("empty string section".into()))
        };
    }
    if !split && strs[0] != 0 {
        return Err(BtfError::BadStrings("does not start with a NUL".into()));
    }
    if strs[strs.len() - 1] != 0 {
        return Err(BtfError::BadStrings("does not end with a NUL".into()));
    }
    if strs.len() > (1 << 31) - 1 {
        return Err(BtfError::BadStrings("larger than 2 GiB".into()));
    }
    Ok(())
}

fn parse_type(w: &mut Words<'_>, id: u32) -> Result<Type, BtfError> {
    let trunc = || bad_type(id, "record truncated");
    let name = StrOffset(w.u32().ok_or_else(trunc)?);
    let info = w.u32().ok_or_else(trunc)?;
    let size_or_type = w.u32().ok_or_else(trunc)?;
    let vlen = (info & 0xffff) as usize;
    let raw_kind = (info >> 24) & 0x1f;
    let kflag = info >> 31 == 1;
    if info & 0x60ff_0000 != 0 {
        return Err(bad_type(
            id,
            format!("reserved bits set in info {info:#010x}"),
        ));
    }
    let kind =
        Kind::from_raw(raw_kind).ok_or_else(|| bad_type(id, format!("unknown kind {raw_kind}")))?;
    // Every record's payload must fit in what is left, before we allocate for it.
    let per_item = match kind {
        Kind::Struct | Kind::Union | Kind::Enum64 | Kind::Datasec => 12,
        Kind::Enum | Kind::FuncProto => 8,
        _ => 0,
    };
    if per_item * vlen > w.data.len() - w.pos {
        return Err(bad_type(
            id,
            format!("vlen {vlen} runs past the type section"),
        ));
    }
    let no_vlen = |k: Kind| -> Result<(), BtfError> {
        if vlen != 0 {
            return Err(bad_type(id, format!("{} with vlen {vlen}", k.name())));
        }
        Ok(())
    };
    let no_kflag = |k: Kind| -> Result<(), BtfError> {
        if kflag {
            return Err(bad_type(id, format!("{} with kflag set", k.name())));
        }
        Ok(())
    };
    let t = TypeId(size_or_type);
    let tk = match kind {
        Kind::Int => {
            no_vlen(kind)?;
            no_kflag(kind)?;
            let enc = w.u32().ok_or_else(trunc)?;
            if enc & 0xf000_ff00 != 0 {
                return Err(bad_type(
                    id,
                    format!("reserved bits set in INT data {enc:#010x}"),
                ));
            }
            TypeKind::Int {
                size: size_or_type,
                encoding: ((enc >> 24) & 0x0f) as u8,
                offset: ((enc >> 16) & 0xff) as u8,
                bits: (enc & 0xff) as u8,
            }
        }
        Kind::Ptr | Kind::Typedef | Kind::Volatile | Kind::Const | Kind::Restrict => {
            no_vlen(kind)?;
            no_kflag(kind)?;
            match kind {
                Kind::Ptr => TypeKind::Ptr(t),
                Kind::Typedef => TypeKind::Typedef(t),
                Kind::Volatile => TypeKind::Volatile(t),
                Kind::Const => TypeKind::Const(t),
                _ => TypeKind::Restrict(t),
            }
        }
        Kind::Array => {
            no_vlen(kind)?;
            no_kflag(kind)?;
            // The model has no place for a non-zero size word; the kernel rejects it too.
            if size_or_type != 0 {
                return Err(bad_type(
                    id,
                    format!("ARRAY with size {size_or_type} (must be 0)"),
                ));
            }
            TypeKind::Array {
                elem_type: TypeId(w.u32().ok_or_else(trunc)?),
                index_type: TypeId(w.u32().ok_or_else(trunc)?),
                nelems: w.u32().ok_or_else(trunc)?,
            }
        }
        Kind::Struct | Kind::Union => {
            let mut members = Vec::with_capacity(vlen);
            for _ in 0..vlen {
                members.push(Member {
                    name: StrOffset(w.u32().ok_or_else(trunc)?),
                    type_id: TypeId(w.u32().ok_or_else(trunc)?),
                    offset: w.u32().ok_or_else(trunc)?,
                });
            }
            let c = Composite {
                size: size_or_type,
                kflag,
                members,
            };
            if kind == Kind::Struct {
                TypeKind::Struct(c)
            } else {
                TypeKind::Union(c)
            }
        }
        Kind::Enum => {
            let mut values = Vec::with_capacity(vlen);
            for _ in 0..vlen {
                values.push(EnumValue {
                    name: StrOffset(w.u32().ok_or_else(trunc)?),
                    value: w.u32().ok_or_else(trunc)?,
                });
            }
            TypeKind::Enum {
                size: size_or_type,
                signed: kflag,
                values,
            }
        }
        Kind::Enum64 => {
            let mut values = Vec::with_capacity(vlen);
            for _ in 0..vlen {
                let name = StrOffset(w.u32().ok_or_else(trunc)?);
                let lo = w.u32().ok_or_else(trunc)? as u64;
                let hi = w.u32().ok_or_else(trunc)? as u64;
                values.push(Enum64Value {
                    name,
                    value: hi << 32 | lo,
                });
            }
            TypeKind::Enum64 {
                size: size_or_type,
                signed: kflag,
                values,
            }
        }
        Kind::Fwd => {
            no_vlen(kind)?;
            if size_or_type != 0 {
                return Err(bad_type(
                    id,
                    format!("FWD with type {size_or_type} (must be 0)"),
                ));
            }
            TypeKind::Fwd { union: kflag }
        }
        Kind::Func => {
            no_kflag(kind)?;
            TypeKind::Func {
                proto: t,
                linkage: u16::try_from(vlen).expect("vlen is 16 bits"),
            }
        }
        Kind::FuncProto => {
            no_kflag(kind)?;
            let mut params = Vec::with_capacity(vlen);
            for _ in 0..vlen {
                params.push(Param {
                    name: StrOffset(w.u32().ok_or_else(trunc)?),
                    type_id: TypeId(w.u32().ok_or_else(trunc)?),
                });
            }
            TypeKind::FuncProto { ret: t, params }
        }
        Kind::Var => {
            no_vlen(kind)?;
            no_kflag(kind)?;
            TypeKind::Var {
                type_id: t,
                linkage: w.u32().ok_or_else(trunc)?,
            }
        }
        Kind::Datasec => {
            no_kflag(kind)?;
            let mut entries = Vec::with_capacity(vlen);
            for _ in 0..vlen {
                entries.push(VarSecInfo {
                    type_id: TypeId(w.u32().ok_or_else(trunc)?),
                    offset: w.u32().ok_or_else(trunc)?,
                    size: w.u32().ok_or_else(trunc)?,
                });
            }
            TypeKind::Datasec {
                size: size_or_type,
                entries,
            }
        }
        Kind::Float => {
            no_vlen(kind)?;
            no_kflag(kind)?;
            TypeKind::Float { size: size_or_type }
        }
        Kind::DeclTag => {
            no_vlen(kind)?;
            TypeKind::DeclTag {
                type_id: t,
                component_idx: w.u32().ok_or_else(trunc)? as i32,
                kflag,
            }
        }
        Kind::TypeTag => {
            no_vlen(kind)?;
            TypeKind::TypeTag { type_id: t, kflag }
        }
    };
    Ok(Type { name, kind: tk })
}

/// Where a BTF blob was found in a file.
pub enum Source {
    /// The whole file is raw BTF.
    Raw,
    /// The `.BTF` section of an ELF file.
    ElfSection,
}

/// Returns the raw BTF bytes of `data`: the file itself if it starts with the BTF
/// magic, or the contents of ELF section `section` (normally `.BTF`).
pub fn btf_bytes<'a>(
    data: &'a [u8],
    section: &str,
) -> Result<(std::borrow::Cow<'a, [u8]>, Source), BtfError> {
    use object::{Object, ObjectSection};
    if data.len() >= 2 && (data[..2] == [0x9f, 0xeb] || data[..2] == [0xeb, 0x9f]) {
        return Ok((data.into(), Source::Raw));
    }
    if data.len() >= 4 && data[..4] == *b"\x7fELF" {
        let file = object::File::parse(data)
            .map_err(|e| BtfError::NotBtf(format!("cannot parse ELF: {e}")))?;
        let sec = file
            .section_by_name(section)
            .ok_or_else(|| BtfError::NotBtf(format!("ELF file has no {section} section")))?;
        // A damaged compression header must not size the buffer it is inflated into:
        // deflate reaches at most 1032:1, zstd about 43,700:1.
        if let Ok(r) = sec.compressed_file_range() {
            let ratio = match r.format {
                object::CompressionFormat::None => 1,
                object::CompressionFormat::Zlib => 1032,
                _ => 1 << 16,
            };
            if r.format != object::CompressionFormat::None
                && r.uncompressed_size
                    > r.compressed_size.saturating_mul(ratio).saturating_add(4096)
            {
                return Err(BtfError::NotBtf(format!(
                    "ELF section {section}: compression header claims {} bytes from {} compressed bytes",
                    r.uncompressed_size, r.compressed_size
                )));
            }
        }
        let bytes = sec
            .uncompressed_data()
            .map_err(|e| BtfError::NotBtf(format!("cannot read ELF section {section}: {e}")))?;
        return Ok((bytes, Source::ElfSection));
    }
    if data.len() >= 2 {
        return Err(BtfError::NotBtf(format!(
            "bad BTF magic {:#06x} (expected 0xeb9f), and not an ELF file",
            u16::from_le_bytes([data[0], data[1]])
        )));
    }
    Err(BtfError::NotBtf(if data.is_empty() {
        "empty file: neither raw BTF (magic 0xeb9f) nor an ELF file".into()
    } else {
        "neither raw BTF (magic 0xeb9f) nor an ELF file".into()
    }))
}

/// Reads BTF from a file: raw BTF, or the `.BTF` section of an ELF file.
/// Errors name the file.
pub fn read_file(path: &Path, base: Option<Arc<Btf>>) -> Result<Btf, crate::Error> {
    read_file_section(path, ".BTF", base)
}

/// Reads BTF from a file: raw BTF, or ELF section `section` of an ELF file.
pub fn read_file_section(
    path: &Path,
    section: &str,
    base: Option<Arc<Btf>>,
) -> Result<Btf, crate::Error> {
    with_btf_bytes(path, section, |bytes| parse(bytes, base))
}

/// Reads BTF from a file as [`read_file`] does, then validates it (header layout and
/// every type); any problem is an error naming the file.
pub fn read_file_checked(path: &Path, base: Option<Arc<Btf>>) -> Result<Btf, crate::Error> {
    with_btf_bytes(path, ".BTF", |bytes| {
        super::validate::parse_checked(bytes, base)
    })
}

/// Reads the base BTF of a split BTF, if `path` is given: raw, or the `.BTF` of an
/// ELF file such as vmlinux, through a mapping (a large vmlinux is not read whole for
/// its `.BTF`). Validated when `checked` (as the kernel checks vmlinux's BTF before a
/// module's), else with the reader's structural checks only (the encoder validates
/// its output over the base instead).
pub fn read_base(path: Option<&Path>, checked: bool) -> Result<Option<Arc<Btf>>, crate::Error> {
    let read = if checked {
        read_file_checked
    } else {
        read_file
    };
    path.map(|p| read(p, None).map(Arc::new)).transpose()
}

/// Maps `path`, finds its BTF bytes (raw file or ELF section `section`) and calls `f`
/// on them; errors name the file.
pub fn with_btf_bytes<T>(
    path: &Path,
    section: &str,
    f: impl FnOnce(&[u8]) -> Result<T, BtfError>,
) -> Result<T, crate::Error> {
    let map = map_file(path)?;
    let (bytes, _) = btf_bytes(&map, section).map_err(|e| crate::Error::btf(path, e))?;
    f(&bytes).map_err(|e| crate::Error::btf(path, e))
}

/// Maps a file read-only; a vmlinux is hundreds of megabytes and we need only its
/// `.BTF` section, so mapping beats reading it.
pub fn map_file(path: &Path) -> Result<memmap2::Mmap, crate::Error> {
    let file = std::fs::File::open(path).map_err(|e| crate::Error::io(path, e))?;
    // Opening a directory succeeds on Linux and mapping it fails with a bare ENODEV
    // ("No such device"); say what is wrong instead.
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(crate::Error::file(
            path,
            "is a directory, not a BTF or ELF file",
        ));
    }
    crate::mmap::map_file(&file).map_err(|e| crate::Error::io(path, e))
}
