//! The raw dump of `bpftool btf dump file F [--base-btf B]`, byte for byte.
//!
//! One line per type: `[id] KIND 'name'` and the kind's fields, then one tab-indented
//! line per member, enumerator, parameter or DATASEC entry. Names are printed as raw
//! bytes, unescaped, as bpftool does; id 0 names print as `(anon)` and offsets past the
//! string section as `(invalid)`. For split BTF only the split part is printed, with
//! ids continuing the base's. (bpftool's `dump_btf_type` in `tools/bpf/bpftool/btf.c`.)

use super::*;
use std::io::{self, Write};

/// bpftool's name for a raw kind (`btf_kind_str`; `UNKNOWN` for void or an unknown
/// kind).
fn kind_str(t: Option<&Type>) -> &'static str {
    t.map_or("UNKNOWN", |t| t.kind().name())
}

/// bpftool's `btf_str`.
fn name(btf: &Btf, off: StrOffset) -> &[u8] {
    if off == StrOffset::EMPTY {
        return b"(anon)";
    }
    btf.str_bytes(off).unwrap_or(b"(invalid)")
}

/// bpftool's `btf_int_enc_str`.
fn int_encoding(enc: u8) -> &'static str {
    match enc {
        0 => "(none)",
        INT_SIGNED => "SIGNED",
        INT_CHAR => "CHAR",
        INT_BOOL => "BOOL",
        _ => "UNKN",
    }
}

fn linkage(l: u32) -> &'static str {
    match l {
        0 => "static",
        1 => "global",
        2 => "extern",
        _ => "(unknown)",
    }
}

/// Writes the dump of `btf`'s own types (for split BTF, not the base's) to `out`.
pub fn dump(btf: &Btf, out: &mut impl Write) -> io::Result<()> {
    for (i, t) in btf.types().iter().enumerate() {
        dump_type(btf, btf.id_at(i), t, out)?;
    }
    Ok(())
}

/// The dump as bytes.
pub fn dump_to_vec(btf: &Btf) -> Vec<u8> {
    let mut out = Vec::new();
    dump(btf, &mut out).expect("writing to a Vec cannot fail");
    out
}

/// The lines of an ENUM or ENUM64 after its name: its encoding, size and count, then
/// each enumerator's name and value (as text).
fn enumerators(
    btf: &Btf,
    out: &mut impl Write,
    size: u32,
    signed: bool,
    values: impl ExactSizeIterator<Item = (StrOffset, String)>,
) -> io::Result<()> {
    let enc = if signed { "SIGNED" } else { "UNSIGNED" };
    write!(out, " encoding={enc} size={size} vlen={}", values.len())?;
    for (n, v) in values {
        out.write_all(b"\n\t'")?;
        out.write_all(name(btf, n))?;
        write!(out, "' val={v}")?;
    }
    Ok(())
}

/// Writes one type's lines.
pub fn dump_type(btf: &Btf, id: TypeId, t: &Type, out: &mut impl Write) -> io::Result<()> {
    write!(out, "[{id}] {} '", t.kind().name())?;
    out.write_all(name(btf, t.name))?;
    out.write_all(b"'")?;
    let quoted = |out: &mut dyn Write, off: StrOffset| -> io::Result<()> {
        out.write_all(b"\n\t'")?;
        out.write_all(name(btf, off))?;
        out.write_all(b"'")
    };
    match &t.kind {
        TypeKind::Int { .. } => {
            if let Some((size, encoding, offset, bits)) = t.kind.int_fields() {
                write!(
                    out,
                    " size={size} bits_offset={offset} nr_bits={bits} encoding={}",
                    int_encoding(encoding)
                )?
            }
        }
        TypeKind::Ptr(r)
        | TypeKind::Const(r)
        | TypeKind::Volatile(r)
        | TypeKind::Restrict(r)
        | TypeKind::Typedef(r)
        | TypeKind::TypeTag { type_id: r, .. } => write!(out, " type_id={r}")?,
        TypeKind::Array {
            elem_type,
            index_type,
            nelems,
        } => write!(
            out,
            " type_id={elem_type} index_type_id={index_type} nr_elems={nelems}"
        )?,
        TypeKind::Struct(c) | TypeKind::Union(c) => {
            write!(out, " size={} vlen={}", c.size, c.members.len())?;
            for m in &c.members {
                quoted(out, m.name)?;
                write!(
                    out,
                    " type_id={} bits_offset={}",
                    m.type_id,
                    m.bit_offset(c.kflag)
                )?;
                let bf = m.bitfield_size(c.kflag);
                if bf != 0 {
                    write!(out, " bitfield_size={bf}")?;
                }
            }
        }
        TypeKind::Enum {
            size,
            signed,
            values,
        } => {
            let val = |v: &EnumValue| match signed {
                true => (v.value as i32).to_string(),
                false => v.value.to_string(),
            };
            let values = values.iter().map(|v| (v.name, val(v)));
            enumerators(btf, out, *size, *signed, values)?
        }
        TypeKind::Enum64 {
            size,
            signed,
            values,
        } => {
            let val = |v: &Enum64Value| match signed {
                true => format!("{}LL", v.value as i64),
                false => format!("{}ULL", v.value),
            };
            let values = values.iter().map(|v| (v.name, val(v)));
            enumerators(btf, out, *size, *signed, values)?
        }
        TypeKind::Fwd { union } => {
            write!(out, " fwd_kind={}", if *union { "union" } else { "struct" })?
        }
        TypeKind::Func { proto, linkage: l } => {
            write!(out, " type_id={proto} linkage={}", linkage(*l as u32))?
        }
        TypeKind::FuncProto { ret, params } => {
            write!(out, " ret_type_id={ret} vlen={}", params.len())?;
            for p in params {
                quoted(out, p.name)?;
                write!(out, " type_id={}", p.type_id)?;
            }
        }
        TypeKind::Var {
            type_id,
            linkage: l,
        } => write!(out, " type_id={type_id}, linkage={}", linkage(*l))?,
        TypeKind::Datasec { size, entries } => {
            write!(out, " size={size} vlen={}", entries.len())?;
            for e in entries {
                write!(
                    out,
                    "\n\ttype_id={} offset={} size={}",
                    e.type_id, e.offset, e.size
                )?;
                // bpftool names the entry's type when the id is in range (id 0 is
                // libbpf's all-zero void record).
                if e.type_id.0 <= btf.type_count() {
                    let vt = btf.get(e.type_id);
                    write!(out, " ({} '", kind_str(vt))?;
                    out.write_all(name(btf, vt.map_or(StrOffset::EMPTY, |t| t.name)))?;
                    out.write_all(b"')")?;
                }
            }
        }
        TypeKind::Float { size } => write!(out, " size={size}")?,
        TypeKind::DeclTag {
            type_id,
            component_idx,
            ..
        } => write!(out, " type_id={type_id} component_idx={component_idx}")?,
    }
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_each_kind_like_bpftool() {
        let mut b = Btf::new(None);
        b.push_named(b"int", TypeKind::int(32, INT_SIGNED));
        let (e, a) = (b.push_str(b"e"), b.push_str(b"A"));
        b.push_type(Type {
            name: e,
            kind: TypeKind::Enum {
                size: 4,
                signed: true,
                values: vec![EnumValue {
                    name: a,
                    value: u32::MAX,
                }],
            },
        });
        b.push_type(Type {
            name: StrOffset::EMPTY,
            kind: TypeKind::Enum64 {
                size: 8,
                signed: false,
                values: vec![Enum64Value {
                    name: a,
                    value: u64::MAX,
                }],
            },
        });
        b.push_type(Type {
            name: e,
            kind: TypeKind::Fwd { union: true },
        });
        b.push_type(Type {
            name: e,
            kind: TypeKind::Enum64 {
                size: 8,
                signed: true,
                values: vec![Enum64Value {
                    name: a,
                    value: (-5i64) as u64,
                }],
            },
        });
        let text = String::from_utf8(dump_to_vec(&b)).unwrap();
        assert_eq!(
            text,
            "[1] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED\n\
             [2] ENUM 'e' encoding=SIGNED size=4 vlen=1\n\t'A' val=-1\n\
             [3] ENUM64 '(anon)' encoding=UNSIGNED size=8 vlen=1\n\t'A' val=18446744073709551615ULL\n\
             [4] FWD 'e' fwd_kind=union\n\
             [5] ENUM64 'e' encoding=SIGNED size=8 vlen=1\n\t'A' val=-5LL\n"
        );
    }
}
