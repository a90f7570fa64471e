#!/usr/bin/env python3
"""Print the section addresses libdwfl gives an ELF file reported offline, the way
pahole opens its input (dwfl_report_offline): one line "INDEX ADDR" (hex address)
per section. For ET_REL files libdwfl lays the allocated sections out itself and
pahole's DWARF addresses are in that layout; dwarf2btf's symbols.rs reproduces it.

    dwfl_layout.py FILE
"""
import ctypes, ctypes.util, sys


def load(names):
    for name in names:
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                pass
    raise SystemExit("dwfl_layout.py: libdw.so.1 not found (apt-get install libdw1)")


dw = load(["libdw.so.1", ctypes.util.find_library("dw")])
elf = load(["libelf.so.1", ctypes.util.find_library("elf")])


class Callbacks(ctypes.Structure):
    _fields_ = [("find_elf", ctypes.c_void_p), ("find_debuginfo", ctypes.c_void_p),
                ("section_address", ctypes.c_void_p), ("debuginfo_path", ctypes.c_void_p)]


class Shdr(ctypes.Structure):  # GElf_Shdr = Elf64_Shdr
    _fields_ = [("sh_name", ctypes.c_uint32), ("sh_type", ctypes.c_uint32),
                ("sh_flags", ctypes.c_uint64), ("sh_addr", ctypes.c_uint64),
                ("sh_offset", ctypes.c_uint64), ("sh_size", ctypes.c_uint64),
                ("sh_link", ctypes.c_uint32), ("sh_info", ctypes.c_uint32),
                ("sh_addralign", ctypes.c_uint64), ("sh_entsize", ctypes.c_uint64)]


def sym(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def main():
    path = sys.argv[1].encode()
    cb = Callbacks(sym(dw, "dwfl_build_id_find_elf"), sym(dw, "dwfl_standard_find_debuginfo"),
                   sym(dw, "dwfl_offline_section_address"), None)
    dw.dwfl_begin.restype = ctypes.c_void_p
    dw.dwfl_begin.argtypes = [ctypes.POINTER(Callbacks)]
    dw.dwfl_report_offline.restype = ctypes.c_void_p
    dw.dwfl_report_offline.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    dw.dwfl_report_end.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    dw.dwfl_module_getelf.restype = ctypes.c_void_p
    dw.dwfl_module_getelf.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
    elf.elf_getscn.restype = ctypes.c_void_p
    elf.elf_getscn.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    elf.gelf_getshdr.restype = ctypes.c_void_p
    elf.gelf_getshdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(Shdr)]
    elf.elf_getshdrnum.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]

    dwfl = dw.dwfl_begin(ctypes.byref(cb))
    mod = dw.dwfl_report_offline(dwfl, path, path, -1)
    if not mod:
        raise SystemExit("dwfl_layout.py: dwfl_report_offline failed")
    dw.dwfl_report_end(dwfl, None, None)
    bias = ctypes.c_uint64()
    e = dw.dwfl_module_getelf(mod, ctypes.byref(bias))
    n = ctypes.c_size_t()
    elf.elf_getshdrnum(e, ctypes.byref(n))
    for i in range(n.value):
        sh = Shdr()
        if elf.gelf_getshdr(elf.elf_getscn(e, i), ctypes.byref(sh)):
            print(i, hex(sh.sh_addr))


main()
