//! Writing a [`Btf`] in the raw format: header, type section, string section.

use super::*;

struct Out {
    buf: Vec<u8>,
    endian: Endian,
}

impl Out {
    fn u32(&mut self, v: u32) {
        match self.endian {
            Endian::Little => self.buf.extend_from_slice(&v.to_le_bytes()),
            Endian::Big => self.buf.extend_from_slice(&v.to_be_bytes()),
        }
    }
}

/// The `info` word of a type: kflag, kind and vlen.
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

fn write_type(o: &mut Out, t: &Type) {
    o.u32(t.name.0);
    o.u32(info_word(&t.kind));
    o.u32(size_or_type(&t.kind));
    match &t.kind {
        TypeKind::Int {
            encoding,
            offset,
            bits,
            ..
        } => o.u32((*encoding as u32) << 24 | (*offset as u32) << 16 | *bits as u32),
        TypeKind::Array {
            elem_type,
            index_type,
            nelems,
        } => {
            o.u32(elem_type.0);
            o.u32(index_type.0);
            o.u32(*nelems);
        }
        TypeKind::Struct(c) | TypeKind::Union(c) => {
            for m in &c.members {
                o.u32(m.name.0);
                o.u32(m.type_id.0);
                o.u32(m.offset);
            }
        }
        TypeKind::Enum { values, .. } => {
            for v in values {
                o.u32(v.name.0);
                o.u32(v.value);
            }
        }
        TypeKind::Enum64 { values, .. } => {
            for v in values {
                o.u32(v.name.0);
                o.u32(v.value as u32);
                o.u32((v.value >> 32) as u32);
            }
        }
        TypeKind::FuncProto { params, .. } => {
            for p in params {
                o.u32(p.name.0);
                o.u32(p.type_id.0);
            }
        }
        TypeKind::Var { linkage, .. } => o.u32(*linkage),
        TypeKind::Datasec { entries, .. } => {
            for e in entries {
                o.u32(e.type_id.0);
                o.u32(e.offset);
                o.u32(e.size);
            }
        }
        TypeKind::DeclTag { component_idx, .. } => o.u32(*component_idx as u32),
        _ => {}
    }
}

/// Serializes `btf` (its own types and strings; a split BTF's base is not included).
pub fn to_bytes(btf: &Btf) -> Vec<u8> {
    let type_len: usize = btf.types().iter().map(Type::record_len).sum();
    let hdr_len = read::HEADER_LEN + btf.header_extra().len();
    let mut o = Out {
        buf: Vec::with_capacity(hdr_len + type_len + btf.strings().len()),
        endian: btf.endian(),
    };
    let magic = match btf.endian() {
        Endian::Little => read::BTF_MAGIC.to_le_bytes(),
        Endian::Big => read::BTF_MAGIC.to_be_bytes(),
    };
    o.buf.extend_from_slice(&magic);
    o.buf.push(read::BTF_VERSION);
    o.buf.push(0);
    o.u32(hdr_len as u32);
    o.u32(0);
    o.u32(type_len as u32);
    o.u32(type_len as u32);
    o.u32(btf.strings().len() as u32);
    o.buf.extend_from_slice(btf.header_extra());
    for t in btf.types() {
        write_type(&mut o, t);
    }
    o.buf.extend_from_slice(btf.strings());
    o.buf
}
