//! Distillation on pahole's own split BTF: distilling `M.kernel-flags.btf` (split over
//! the corpus vmlinux's `.BTF`) gives exactly the `.BTF` and `.BTF.base` that
//! `pahole -J $KFLAGS,distilled_base --btf_base vmlinux M.ko` writes into `M.ko`.

mod elf_write_util;

use dwarf2btf::btf::{read, write};
use dwarf2btf::distill::distill_base;
use elf_write_util::*;
use std::sync::Arc;

#[test]
fn distilled_reference_bytes() {
    let (Some(corpus), Some(reference)) = (corpus(), reference()) else {
        return;
    };
    let base = Arc::new(read::read_file(&corpus.join("vmlinux"), None).unwrap());
    for m in ["vsock_loopback", "nf_tables", "nf_conntrack"] {
        let split = read::read_file(
            &reference.join(format!("{m}.kernel-flags.btf")),
            Some(base.clone()),
        )
        .unwrap();
        let d = distill_base(&split).unwrap();
        let want_base = std::fs::read(reference.join(format!("{m}.distilled.BTF.base"))).unwrap();
        let want_split = std::fs::read(reference.join(format!("{m}.distilled.BTF"))).unwrap();
        assert!(
            write::to_bytes(&d.base) == want_base,
            "{m}: distilled base differs from pahole's .BTF.base"
        );
        assert!(
            write::to_bytes(&d.split) == want_split,
            "{m}: distilled split differs from pahole's .BTF"
        );
        // And what we wrote reads back as valid split BTF over its distilled base.
        let again = read::parse(&want_split, Some(d.base.clone())).unwrap();
        dwarf2btf::btf::validate::check(&again).unwrap();
    }
}
