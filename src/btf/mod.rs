//! BTF: the data model, the raw-format reader and writer, the validator and the
//! bpftool-style dump.
//!
//! A [`Btf`] holds the types and strings of one BTF blob. Split BTF (a module's types
//! over vmlinux) holds an `Arc` of its base: its type ids continue after the base's
//! last id and its string offsets after the end of the base's string section.

pub mod dump;
pub mod layout;
pub mod read;
mod types;
pub mod validate;
pub mod write;

pub use layout::KindLayout;
pub use read::BtfError;
pub use types::*;

use std::sync::Arc;

/// Byte order of a BTF blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    /// Little-endian (x86, arm64 …).
    Little,
    /// Big-endian (s390x …).
    Big,
}

impl Endian {
    /// The byte order of the machine we run on.
    pub fn native() -> Endian {
        if cfg!(target_endian = "big") {
            Endian::Big
        } else {
            Endian::Little
        }
    }
}

/// One BTF blob: types and strings, over an optional base.
#[derive(Clone, Debug)]
pub struct Btf {
    /// The base this BTF is split from, if any.
    base: Option<Arc<Btf>>,
    /// This blob's own types; the first has id `first_id()`.
    types: Vec<Type>,
    /// This blob's own string section bytes (a base's starts with a NUL).
    strings: Vec<u8>,
    /// Byte order to write in.
    endian: Endian,
    /// Header bytes past the classic 24 (libbpf ≥ 1.8 writes two zero `layout`
    /// words); kept so that reading and writing a file gives the same bytes. With a
    /// layout section the layout words are zero here: they are written from it.
    header_extra: Vec<u8>,
    /// The kind layout section, if the blob has one.
    layout: Option<Vec<KindLayout>>,
}

impl Btf {
    /// An empty BTF: no types and, without a base, a string section of one NUL
    /// (as libbpf's `btf__new_empty` and `btf__new_empty_split`).
    pub fn new(base: Option<Arc<Btf>>) -> Btf {
        let strings = if base.is_some() { Vec::new() } else { vec![0] };
        let endian = base.as_ref().map_or(Endian::native(), |b| b.endian);
        Btf {
            base,
            types: Vec::new(),
            strings,
            endian,
            header_extra: Vec::new(),
            layout: None,
        }
    }

    /// Assembles a BTF from its parts (used by the reader and by dedup).
    pub fn from_parts(
        base: Option<Arc<Btf>>,
        types: Vec<Type>,
        strings: Vec<u8>,
        endian: Endian,
    ) -> Btf {
        Btf {
            base,
            types,
            strings,
            endian,
            header_extra: Vec::new(),
            layout: None,
        }
    }

    /// The base BTF, if this is split BTF.
    pub fn base(&self) -> Option<&Arc<Btf>> {
        self.base.as_ref()
    }

    /// Byte order.
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// Sets the byte order used when writing.
    pub fn set_endian(&mut self, endian: Endian) {
        self.endian = endian;
    }

    /// Extra header bytes past the classic 24-byte header.
    pub fn header_extra(&self) -> &[u8] {
        &self.header_extra
    }

    /// Sets the extra header bytes (must be a multiple of 4 and all zero to be valid).
    pub fn set_header_extra(&mut self, extra: Vec<u8>) {
        self.header_extra = extra;
    }

    /// The kind layout section, if any.
    pub fn layout(&self) -> Option<&[KindLayout]> {
        self.layout.as_deref()
    }

    /// Sets the kind layout section (written between types and strings; the header
    /// grows to 32 bytes if shorter).
    pub fn set_layout(&mut self, layout: Option<Vec<KindLayout>>) {
        self.layout = layout;
    }

    /// Number of types in the base chain (ids `1..=base_type_count()` are the base's).
    pub fn base_type_count(&self) -> u32 {
        self.base.as_ref().map_or(0, |b| b.type_count())
    }

    /// Length of the base chain's string sections (own offsets start after them).
    pub fn base_str_len(&self) -> u32 {
        self.base.as_ref().map_or(0, |b| b.str_end())
    }

    /// The id of this blob's first own type.
    pub fn first_id(&self) -> TypeId {
        TypeId(self.base_type_count() + 1)
    }

    /// Number of types including the base's, not counting void: the largest valid id.
    pub fn type_count(&self) -> u32 {
        self.base_type_count() + self.own_ids(self.types.len())
    }

    /// The id of this blob's `i`-th own type (0: its first).
    pub fn id_at(&self, i: usize) -> TypeId {
        TypeId(self.first_id().0 + self.own_ids(i))
    }

    /// `n` of this blob's own types as a count of ids. A blob holds fewer types than
    /// u32 counts (a reader reads at most u32 of them from a u32-long section; the
    /// encoder and dedup stop at the kernel's `MAX_TYPE` ids, which the output's
    /// validation checks), so this cannot truncate.
    #[allow(clippy::cast_possible_truncation)]
    fn own_ids(&self, n: usize) -> u32 {
        n as u32
    }

    /// Offset one past the end of this blob's string section, in the shared space.
    pub fn str_end(&self) -> u32 {
        // A string section longer than u32 cannot be offset at all: its end reads as
        // u32::MAX, past every offset a record can hold.
        let own = u32::try_from(self.strings.len()).unwrap_or(u32::MAX);
        self.base_str_len().saturating_add(own)
    }

    /// This blob's own types.
    pub fn types(&self) -> &[Type] {
        &self.types
    }

    /// This blob's own types, taken out of it.
    pub fn into_types(self) -> Vec<Type> {
        self.types
    }

    /// This blob's own string section, taken out of it (its types dropped).
    pub fn into_strings(self) -> Vec<u8> {
        self.strings
    }

    /// This blob's own types, mutable.
    pub fn types_mut(&mut self) -> &mut Vec<Type> {
        &mut self.types
    }

    /// This blob's own string section.
    pub fn strings(&self) -> &[u8] {
        &self.strings
    }

    /// The type with id `id` (base or own); None for void or an id out of range.
    pub fn get(&self, id: TypeId) -> Option<&Type> {
        let base_count = self.base_type_count();
        if id.0 == 0 {
            None
        } else if id.0 <= base_count {
            self.base.as_ref()?.get(id)
        } else {
            self.types.get((id.0 - base_count - 1) as usize)
        }
    }

    /// The NUL-terminated string at `off` (base or own), without its NUL, or None if
    /// `off` is out of range or the string is unterminated.
    pub fn str_bytes(&self, off: StrOffset) -> Option<&[u8]> {
        let base_len = self.base_str_len();
        if off.0 < base_len {
            return self.base.as_ref()?.str_bytes(off);
        }
        let start = (off.0 - base_len) as usize;
        let rest = self.strings.get(start..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some(&rest[..end])
    }

    /// The string at `off` as text (lossy), "" if it cannot be read.
    pub fn str_at(&self, off: StrOffset) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.str_bytes(off).unwrap_or(b""))
    }

    /// Appends `s` to this blob's string section and returns its offset. Does not
    /// look for an existing copy: string dedup is the dedup pass's job.
    pub fn push_str(&mut self, s: &[u8]) -> StrOffset {
        if s.is_empty() {
            // Offset 0 is "" in a base and, through it, in every split BTF.
            return StrOffset::EMPTY;
        }
        let off = self.str_end();
        self.strings.extend_from_slice(s);
        self.strings.push(0);
        StrOffset(off)
    }

    /// Appends the string `name` and a type of that name and `kind`; returns the
    /// type's id.
    pub fn push_named(&mut self, name: &[u8], kind: TypeKind) -> TypeId {
        let name = self.push_str(name);
        self.push_type(Type { name, kind })
    }

    /// Appends a type and returns its id.
    pub fn push_type(&mut self, t: Type) -> TypeId {
        self.types.push(t);
        TypeId(self.type_count())
    }
}
