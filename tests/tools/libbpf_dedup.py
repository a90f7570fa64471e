#!/usr/bin/env python3
"""Deduplicate a BTF blob with the system libbpf (libbpf.so.1), the reference for our
dedup: libbpf_dedup.py IN OUT [--base BASE]

IN and BASE are raw BTF or ELF files with a .BTF section. OUT gets libbpf's raw BTF
(btf__raw_data after btf__dedup). For split BTF only the split part is written.
"""
import ctypes, ctypes.util, sys

def load_libbpf():
    for name in ("libbpf.so.1", ctypes.util.find_library("bpf")):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                pass
    raise SystemExit("libbpf_dedup.py: libbpf.so.1 not found (apt-get install libbpf1)")

lib = load_libbpf()
lib.btf__parse.restype = ctypes.c_void_p
lib.btf__parse.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
lib.btf__parse_split.restype = ctypes.c_void_p
lib.btf__parse_split.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
lib.btf__dedup.restype = ctypes.c_int
lib.btf__dedup.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
lib.btf__raw_data.restype = ctypes.c_void_p
lib.btf__raw_data.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]
lib.libbpf_get_error.restype = ctypes.c_long
lib.libbpf_get_error.argtypes = [ctypes.c_void_p]

def parse(path, base=None):
    # btf__parse reads raw BTF and ELF .BTF sections alike.
    p = lib.btf__parse_split(path.encode(), base) if base else lib.btf__parse(path.encode(), None)
    if not p or lib.libbpf_get_error(p):
        raise SystemExit(f"libbpf_dedup.py: libbpf cannot parse {path}")
    return p

def main():
    args = sys.argv[1:]
    base = None
    if "--base" in args:
        i = args.index("--base")
        base = parse(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    btf = parse(args[0], base)
    err = lib.btf__dedup(btf, None)
    if err:
        raise SystemExit(f"libbpf_dedup.py: btf__dedup failed: {err}")
    size = ctypes.c_uint32()
    data = lib.btf__raw_data(btf, ctypes.byref(size))
    with open(args[1], "wb") as f:
        f.write(ctypes.string_at(data, size.value))

main()
