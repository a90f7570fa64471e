//! The kind layout section of libbpf ≥ 1.8 (`layout` feature): one record per kind
//! known when the BTF was written, giving the size of the data after the common
//! `btf_type` (`info_sz`) and of each of its `vlen` elements (`elem_sz`), so that a
//! reader can skip kinds it does not know. It lies between the type and string
//! sections; the header's `layout_off`/`layout_len` words (bytes 24..32) locate it.

use super::Endian;

/// Bytes of one record.
pub const RECORD_LEN: usize = 4;

/// One kind's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindLayout {
    /// Bytes of the one element after `btf_type` (INT's word, ARRAY's record …).
    pub info_sz: u8,
    /// Bytes of each of the `vlen` elements (members, enumerators, parameters …).
    pub elem_sz: u8,
    /// Unused so far (libbpf writes 0).
    pub flags: u16,
}

/// libbpf's table (`layouts[NR_BTF_KINDS]` of btf.c), kinds 0 (UNKN) to 19 (ENUM64):
/// what pahole writes with `layout`.
pub fn libbpf_table() -> Vec<KindLayout> {
    const fn k(info_sz: u8, elem_sz: u8) -> KindLayout {
        KindLayout {
            info_sz,
            elem_sz,
            flags: 0,
        }
    }
    vec![
        k(0, 0),  // UNKN
        k(4, 0),  // INT: encoding word
        k(0, 0),  // PTR
        k(12, 0), // ARRAY: btf_array
        k(0, 12), // STRUCT: btf_member
        k(0, 12), // UNION
        k(0, 8),  // ENUM: btf_enum
        k(0, 0),  // FWD
        k(0, 0),  // TYPEDEF
        k(0, 0),  // VOLATILE
        k(0, 0),  // CONST
        k(0, 0),  // RESTRICT
        k(0, 0),  // FUNC
        k(0, 8),  // FUNC_PROTO: btf_param
        k(4, 0),  // VAR: linkage
        k(0, 12), // DATASEC: btf_var_secinfo
        k(0, 0),  // FLOAT
        k(4, 0),  // DECL_TAG: component_idx
        k(0, 0),  // TYPE_TAG
        k(0, 12), // ENUM64: btf_enum64
    ]
}

/// The section's bytes in `endian` (only `flags` has a byte order).
pub fn to_bytes(layouts: &[KindLayout], endian: Endian) -> Vec<u8> {
    let mut out = Vec::with_capacity(layouts.len() * RECORD_LEN);
    for l in layouts {
        out.push(l.info_sz);
        out.push(l.elem_sz);
        out.extend_from_slice(&match endian {
            Endian::Little => l.flags.to_le_bytes(),
            Endian::Big => l.flags.to_be_bytes(),
        });
    }
    out
}

/// Parses a section of whole records (the caller checks the length).
pub fn parse(data: &[u8], endian: Endian) -> Vec<KindLayout> {
    data.chunks_exact(RECORD_LEN)
        .map(|r| KindLayout {
            info_sz: r[0],
            elem_sz: r[1],
            flags: match endian {
                Endian::Little => u16::from_le_bytes([r[2], r[3]]),
                Endian::Big => u16::from_be_bytes([r[2], r[3]]),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_round_trips_and_matches_the_record_sizes() {
        let t = libbpf_table();
        assert_eq!(t.len(), 20);
        let bytes = to_bytes(&t, Endian::Big);
        assert_eq!(bytes.len(), 80);
        assert_eq!(parse(&bytes, Endian::Big), t);
        // The record sizes the writer uses, kind by kind.
        assert_eq!((t[1].info_sz, t[4].elem_sz, t[19].elem_sz), (4, 12, 12));
    }

    #[test]
    fn blob_with_layout_reads_back_and_passes_the_kernel_s_layout_checks() {
        use crate::btf::{read, validate, write, Btf, Type, TypeKind};
        for endian in [Endian::Little, Endian::Big] {
            let mut b = Btf::new(None);
            b.set_endian(endian);
            b.set_header_extra(vec![0; 8]);
            let name = b.push_str(b"int");
            b.push_type(Type {
                name,
                kind: TypeKind::Int {
                    size: 4,
                    encoding: 1,
                    offset: 0,
                    bits: 32,
                },
            });
            b.set_layout(Some(libbpf_table()));
            let bytes = write::to_bytes(&b);
            // Header, one INT (16 bytes), the 80-byte table, "\0int\0".
            assert_eq!(bytes.len(), 32 + 16 + 80 + 5);
            assert!(validate::check_layout(&bytes).is_empty());
            let back = read::parse(&bytes, None).unwrap();
            assert_eq!(back.layout(), Some(&libbpf_table()[..]));
            assert_eq!(back.header_extra(), &[0; 8]);
            assert_eq!(write::to_bytes(&back), bytes);
            // A layout section overlapping the strings is refused.
            let mut bad = bytes.clone();
            let len_at = 28;
            let w = match endian {
                Endian::Little => 84u32.to_le_bytes(),
                Endian::Big => 84u32.to_be_bytes(),
            };
            bad[len_at..len_at + 4].copy_from_slice(&w);
            assert!(read::parse(&bad, None).is_err());
        }
    }
}
