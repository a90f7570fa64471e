#!/usr/bin/env python3
"""extract_section.py ELF SECTION OUT: copies one section's bytes (any machine, 64-bit
ELF of either byte order); objcopy refuses the BPF machine type."""
import struct, sys

data = open(sys.argv[1], "rb").read()
end = "<" if data[5] == 1 else ">"
shoff, = struct.unpack_from(end + "Q", data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3a)
def sh(i):
    return struct.unpack_from(end + "IIQQQQIIQQ", data, shoff + i * shentsize)
stro = sh(shstrndx)[4]
for i in range(shnum):
    name, _, _, _, off, size = sh(i)[:6]
    n = data[stro + name:data.index(b"\0", stro + name)].decode()
    if n == sys.argv[2]:
        open(sys.argv[3], "wb").write(data[off:off + size])
        sys.exit(0)
sys.exit(f"{sys.argv[1]}: no section {sys.argv[2]}")
