#!/usr/bin/env python3
"""Times (thread CPU time) libbpf's btf__parse and btf__dedup in-process (best of N runs), for
benches/dedup.rs: dedup_libbpf_time.py FILE N. Prints "parse_s dedup_s maxrss_kb"."""
import ctypes, resource, sys, time

lib = ctypes.CDLL("libbpf.so.1")
lib.btf__parse.restype = ctypes.c_void_p
lib.btf__parse.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
lib.btf__dedup.restype = ctypes.c_int
lib.btf__dedup.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
lib.btf__free.argtypes = [ctypes.c_void_p]

path, n = sys.argv[1].encode(), int(sys.argv[2])
best_parse = best_dedup = float("inf")
for _ in range(n):
    t0 = time.thread_time()
    btf = lib.btf__parse(path, None)
    t1 = time.thread_time()
    if not btf or lib.btf__dedup(btf, None):
        raise SystemExit("libbpf failed")
    t2 = time.thread_time()
    lib.btf__free(btf)
    best_parse, best_dedup = min(best_parse, t1 - t0), min(best_dedup, t2 - t1)
print(f"{best_parse:.4f} {best_dedup:.4f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
