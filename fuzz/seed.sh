#!/bin/sh
# Builds the seed corpora in fuzz/corpus/<target>/ from the pahole reference files,
# small objects compiled from tests/btf_fixtures and fuzz/c/, and the small corpus
# module. Run from the repository root: sh fuzz/seed.sh
set -eu
REF=${DWARF2BTF_REFERENCE:-../shared/reference/pahole-1.31}
[ -d "$REF" ] || REF=/work/shared/reference/pahole-1.31
CORPUS=${DWARF2BTF_CORPUS:-$HOME/.cache/dwarf2btf-corpus}
OUT=fuzz/corpus
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

mkdir -p "$OUT/btf_read_validate" "$OUT/dedup" "$OUT/elf_reader" "$OUT/dwarf_loader"
# BTF: every small reference file (the vmlinux ones are megabytes: too slow per run).
for f in "$REF"/*.distilled.BTF "$REF"/*.distilled.BTF.base "$REF"/[!v]*.kernel-flags.btf; do
	cp "$f" "$OUT/btf_read_validate/$(basename "$f")"
	cp "$f" "$OUT/dedup/$(basename "$f")"
done
cp fuzz/seeds/btf/* "$OUT/btf_read_validate/"
cp fuzz/seeds/btf/* "$OUT/dedup/"
# Compiler-made BTF: clang's BPF target and gcc -gbtf.
if clang -target bpf -g -O2 -c tests/btf_fixtures/kinds.c -o "$TMP/kinds.bpf.o" 2>/dev/null; then
	cp "$TMP/kinds.bpf.o" "$OUT/btf_read_validate/clang_kinds.bpf.o"
	python3 fuzz/extract_section.py "$TMP/kinds.bpf.o" .BTF "$OUT/btf_read_validate/clang_kinds.btf"
fi
if gcc -gbtf -c tests/btf_fixtures/gcc_kinds.c -o "$TMP/gcc_kinds.o" 2>/dev/null; then
	python3 fuzz/extract_section.py "$TMP/gcc_kinds.o" .BTF "$OUT/btf_read_validate/gcc_kinds.btf"
fi
# ELF + DWARF: small C files with gcc and clang, DWARF 4 and 5, -O0 and -O2.
for c in fuzz/c/*.c tests/btf_fixtures/gcc_kinds.c; do
	n=$(basename "$c" .c)
	for cc in gcc clang; do
		for v in 4 5; do
			o="$TMP/$n.$cc.dwarf$v.o"
			$cc -g -gdwarf-$v -O2 -c "$c" -o "$o" 2>/dev/null || continue
			cp "$o" "$OUT/elf_reader/"
			cp "$o" "$OUT/dwarf_loader/"
		done
	done
done
# Compressed debug sections (SHF_COMPRESSED, zlib and zstd).
for z in zlib zstd; do
	o="$TMP/types.gcc.gz-$z.o"
	gcc -g -gz=$z -O2 -c fuzz/c/types.c -o "$o" 2>/dev/null || continue
	cp "$o" "$OUT/elf_reader/"
	cp "$o" "$OUT/dwarf_loader/"
done
cp fuzz/seeds/elf/* "$OUT/elf_reader/" 2>/dev/null || true
cp fuzz/seeds/elf/* "$OUT/dwarf_loader/" 2>/dev/null || true
# The smallest corpus module (580 KiB), if unpacked.
if [ -f "$CORPUS/vsock_loopback.ko" ]; then
	cp "$CORPUS/vsock_loopback.ko" "$OUT/elf_reader/"
	cp "$CORPUS/vsock_loopback.ko" "$OUT/dwarf_loader/"
	python3 fuzz/extract_section.py "$CORPUS/vsock_loopback.ko" .BTF "$OUT/btf_read_validate/vsock_loopback.ko.btf"
fi
echo "seeds in $OUT:"
for d in "$OUT"/*; do echo "  $(basename "$d"): $(ls "$d" | wc -l) files"; done
