//! Writing a [`Btf`] in the raw format: header, type section, string section.

use super::*;

/// A raw BTF blob being written: the header first, then the type words, then the
/// strings. The writer here and dedup's output (which holds flat records) both use it.
pub struct RawWriter {
    buf: Vec<u8>,
    endian: Endian,
    /// The kind layout section, written between the types and the strings.
    layout: Vec<u8>,
}

impl RawWriter {
    /// Starts a blob in `endian` whose type section is `type_len` bytes and string
    /// section `str_len` bytes, with `header_extra` past the classic 24-byte header
    /// and, if given, a kind layout section (libbpf's order: types, layout, strings;
    /// its place goes in the header's layout words, which need a 32-byte header).
    pub fn new(
        endian: Endian,
        header_extra: &[u8],
        layout: Option<&[KindLayout]>,
        type_len: usize,
        str_len: usize,
    ) -> Self {
        let layout = layout.map_or(Vec::new(), |l| super::layout::to_bytes(l, endian));
        let mut extra = header_extra.to_vec();
        if !layout.is_empty() {
            if extra.len() < read::LAYOUT_WORDS_END - read::HEADER_LEN {
                extra.resize(read::LAYOUT_WORDS_END - read::HEADER_LEN, 0);
            }
            let words = [len_word(type_len), len_word(layout.len())];
            for (i, w) in words.into_iter().enumerate() {
                let b = match endian {
                    Endian::Little => w.to_le_bytes(),
                    Endian::Big => w.to_be_bytes(),
                };
                extra[4 * i..4 * i + 4].copy_from_slice(&b);
            }
        }
        let hdr_len = read::HEADER_LEN + extra.len();
        let mut o = RawWriter {
            buf: Vec::with_capacity(hdr_len + type_len + layout.len() + str_len),
            endian,
            layout,
        };
        let magic = match endian {
            Endian::Little => read::BTF_MAGIC.to_le_bytes(),
            Endian::Big => read::BTF_MAGIC.to_be_bytes(),
        };
        o.buf.extend_from_slice(&magic);
        o.buf.push(read::BTF_VERSION);
        o.buf.push(0);
        let str_off = type_len + o.layout.len();
        for v in [hdr_len, 0, type_len, str_off, str_len] {
            o.word(len_word(v));
        }
        o.buf.extend_from_slice(&extra);
        o
    }

    /// Appends one word of the type section.
    #[inline]
    pub fn word(&mut self, v: u32) {
        match self.endian {
            Endian::Little => self.buf.extend_from_slice(&v.to_le_bytes()),
            Endian::Big => self.buf.extend_from_slice(&v.to_be_bytes()),
        }
    }

    /// Appends the string section and returns the blob.
    pub fn finish(mut self, strings: &[u8]) -> Vec<u8> {
        self.buf.extend_from_slice(&self.layout);
        self.buf.extend_from_slice(strings);
        self.buf
    }
}

/// A section length or offset as its header word. One past u32 cannot be written:
/// it becomes u32::MAX, which no reader takes for the section that follows, so the
/// blob is refused when it is read back (every encoding is, before it is written
/// out) rather than read as other types.
fn len_word(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The low and high words of an ENUM64 value, as the record holds them.
#[allow(clippy::cast_possible_truncation)] // the two halves, on purpose
pub(crate) fn halves(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

/// The `info` word of a type: kflag, kind and vlen. A vlen past 16 bits cannot be
/// written: the encoder refuses such a type first (`encode`: "more than BTF's 65535"),
/// and the reader cannot make one.
///
/// Always inlined: the flattening asks it for every type a unit encodes (4.3 million
/// calls on the corpus vmlinux, 0.21% of the instructions as calls).
#[allow(clippy::cast_possible_truncation)] // masked to its 16 bits
#[inline(always)]
pub fn info_word(t: &TypeKind) -> u32 {
    (t.kflag() as u32) << 31 | (t.kind() as u32) << 24 | (t.vlen() as u32 & 0xffff)
}

/// The third word of a type record: a size or a type id.
pub fn size_or_type(t: &TypeKind) -> u32 {
    match t {
        TypeKind::Int { size, .. }
        | TypeKind::Enum { size, .. }
        | TypeKind::Enum64 { size, .. }
        | TypeKind::Datasec { size, .. }
        | TypeKind::Float { size } => *size,
        TypeKind::Struct(c) | TypeKind::Union(c) => c.size,
        TypeKind::Fwd { .. } | TypeKind::Array { .. } => 0,
        TypeKind::Ptr(t)
        | TypeKind::Typedef(t)
        | TypeKind::Volatile(t)
        | TypeKind::Const(t)
        | TypeKind::Restrict(t) => t.0,
        TypeKind::Func { proto, .. } => proto.0,
        TypeKind::FuncProto { ret, .. } => ret.0,
        TypeKind::Var { type_id, .. }
        | TypeKind::DeclTag { type_id, .. }
        | TypeKind::TypeTag { type_id, .. } => type_id.0,
    }
}

/// Calls `f` with each 32-bit word of `t`'s raw record, in order.
#[inline]
pub fn record_words(t: &Type, mut f: impl FnMut(u32)) {
    f(t.name.0);
    f(info_word(&t.kind));
    f(size_or_type(&t.kind));
    match &t.kind {
        TypeKind::Int {
            encoding,
            offset,
            bits,
            ..
        } => f((*encoding as u32) << 24 | (*offset as u32) << 16 | *bits as u32),
        TypeKind::Array {
            elem_type,
            index_type,
            nelems,
        } => {
            f(elem_type.0);
            f(index_type.0);
            f(*nelems);
        }
        TypeKind::Struct(c) | TypeKind::Union(c) => {
            for m in &c.members {
                f(m.name.0);
                f(m.type_id.0);
                f(m.offset);
            }
        }
        TypeKind::Enum { values, .. } => {
            for v in values {
                f(v.name.0);
                f(v.value);
            }
        }
        TypeKind::Enum64 { values, .. } => {
            for v in values {
                f(v.name.0);
                let (lo, hi) = halves(v.value);
                f(lo);
                f(hi);
            }
        }
        TypeKind::FuncProto { params, .. } => {
            for p in params {
                f(p.name.0);
                f(p.type_id.0);
            }
        }
        TypeKind::Var { linkage, .. } => f(*linkage),
        TypeKind::Datasec { entries, .. } => {
            for e in entries {
                f(e.type_id.0);
                f(e.offset);
                f(e.size);
            }
        }
        TypeKind::DeclTag { component_idx, .. } => f(*component_idx as u32),
        _ => {}
    }
}

/// Serializes `btf` (its own types and strings; a split BTF's base is not included).
pub fn to_bytes(btf: &Btf) -> Vec<u8> {
    let type_len: usize = btf.types().iter().map(Type::record_len).sum();
    let mut o = RawWriter::new(
        btf.endian(),
        btf.header_extra(),
        btf.layout(),
        type_len,
        btf.strings().len(),
    );
    for t in btf.types() {
        record_words(t, |v| o.word(v));
    }
    o.finish(btf.strings())
}
