//! Big-endian BTF (s390x and friends): a reference converted to big endian reads
//! back to the same types, writes back to the same bytes, validates, and dumps the
//! same as the little-endian original, for us and for bpftool.

mod common;

use common::*;
use dwarf2btf::btf::{dump, read, validate, write, Btf, Endian};
use std::process::Command;
use std::sync::Arc;

fn to_big(btf: &Btf) -> Vec<u8> {
    let mut b = btf.clone();
    b.set_endian(Endian::Big);
    // libbpf byte-swaps only the classic 24-byte header.
    b.set_header_extra(Vec::new());
    write::to_bytes(&b)
}

#[test]
fn big_endian_round_trip_and_dump() {
    let Some(dir) = reference() else {
        return;
    };
    let base_le = std::fs::read(dir.join("nf_tables.distilled.BTF.base")).unwrap();
    let split_le = std::fs::read(dir.join("nf_tables.distilled.BTF")).unwrap();
    let base = Arc::new(validate::parse_checked(&base_le, None).unwrap());
    let split = validate::parse_checked(&split_le, Some(base.clone())).unwrap();

    let base_be = to_big(&base);
    assert_eq!(&base_be[..2], &[0xeb, 0x9f]);
    let base2 = Arc::new(validate::parse_checked(&base_be, None).unwrap());
    assert_eq!(base2.endian(), Endian::Big);
    assert_eq!(base2.types(), base.types());
    assert!(write::to_bytes(&base2) == base_be);

    let split_be = to_big(&split);
    // A little-endian base under a big-endian split BTF is refused.
    assert!(read::parse(&split_be, Some(base.clone())).is_err());
    let split2 = validate::parse_checked(&split_be, Some(base2.clone())).unwrap();
    assert_eq!(split2.types(), split.types());
    assert!(write::to_bytes(&split2) == split_be);
    assert!(dump::dump_to_vec(&split2) == dump::dump_to_vec(&split));

    if !need("bpftool") {
        return;
    }
    let tmp = std::env::temp_dir().join(format!("dwarf2btf-btf-be-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let (bf, sf) = (tmp.join("base.btf"), tmp.join("split.btf"));
    std::fs::write(&bf, &base_be).unwrap();
    std::fs::write(&sf, &split_be).unwrap();
    let out = Command::new("bpftool")
        .args(["btf", "dump", "file"])
        .arg(&sf)
        .arg("--base-btf")
        .arg(&bf)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&tmp).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == dump::dump_to_vec(&split),
        "bpftool's dump of the big-endian copy differs"
    );
}
