#!/usr/bin/env python3
"""Predict the VARs and DATASEC entries pahole v1.31 emits for a gcc-built vmlinux
with `global_var` (docs/pahole-functions.md §7), and compare with a reference BTF.

    predict_vars.py VMLINUX GLOBAL_VAR.btf

A cross-check of the spec, not part of dwarf2btf: CU-level DIEs come from
`llvm-dwarfdump --recurse-depth=1`, sections and symbols from `readelf`, the
reference from `bpftool`. Approximation: a variable's size is only known to be 0
when its (specification's) type is an incomplete array; other zero-sized types
(empty structs) are predicted present. Measured on the corpus: all 31 848
reference entries predicted (section, name, offset), plus one extra,
`shadow_nodes_key`, a `struct lock_class_key`, which is empty without lockdep.
"""
import collections, os, re, subprocess, sys, tempfile

VMLINUX, REF = sys.argv[1:3]
tmp = tempfile.mkdtemp(prefix="predict_vars.")
paths = {k: os.path.join(tmp, k) for k in ("sects", "syms", "top", "ref")}
for key, cmd in (("sects", ["readelf", "-W", "-S", VMLINUX]),
                 ("syms", ["readelf", "-W", "-s", VMLINUX]),
                 ("top", ["llvm-dwarfdump", "--debug-info", "--recurse-depth=1", VMLINUX]),
                 ("ref", ["bpftool", "btf", "dump", "file", REF])):
    with open(paths[key], "w") as f:
        subprocess.run(cmd, stdout=f, check=True)
re_die=re.compile(r'^(0x[0-9a-f]+):( +)(DW_TAG_\w+)')
re_attr=re.compile(r'^( +)DW_AT_(\w+)\s+\((.*)$')
secs=[]
for l in open(paths['sects']):
    m=re.match(r'\s*\[\s*(\d+)\]\s+(\S*)\s+(\S+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)',l)
    if m: secs.append((int(m.group(1)),m.group(2),m.group(3),int(m.group(4),16),int(m.group(5),16)))
def sec_for(addr):
    for i,n,t,a,sz in secs:
        if i==0: continue
        if t in ('PROGBITS','NOBITS') and a<=addr and addr-a<sz: return (i,n,a)
objs=set()
for line in open(paths['syms']):
    p=line.split()
    if len(p)>=8 and p[3]=='OBJECT' and p[6].isdigit(): objs.add((int(p[6]),p[7]))
SKIP=('__UNIQUE_ID','__tpstrtab_','__exitcall_','__gendwarfksyms_ptr_','__func_stack_frame_non_standard_')
vars_=[]; cur=None; decl_names={}
def flush():
    if cur is None: return
    vars_.append(cur)
with open(paths['top']) as f:
    for l in f:
        if l.startswith('0x'):
            m=re_die.match(l)
            if m:
                flush()
                depth=(len(m.group(2))-1)//2
                cur={'off':int(m.group(1),16),'depth':depth,'tag':m.group(3)} if m.group(3)=='DW_TAG_variable' and depth==1 else None
                continue
        if cur is None: continue
        m=re_attr.match(l)
        if not m or len(m.group(1))!=16: continue
        a,v=m.group(2),m.group(3)
        if a=='name': cur['name']=v[1:v.rfind('"')]
        elif a=='declaration': cur['decl']=True
        elif a=='artificial': cur['art']=True
        elif a=='specification':
            mm=re.match(r'(0x[0-9a-f]+) "(.*)"\)',v); cur['spec']=mm.group(2) if mm else None; cur['specoff']=int(mm.group(1),16) if mm else None
        elif a=='external': cur['ext']=True
        elif a=='location':
            mm=re.match(r'DW_OP_addrx? (0x[0-9a-f]+)',v)
            if mm: cur['addr']=int(mm.group(1),16)
        elif a=='type': cur['type']=v
    flush()
byoff={v['off']:v for v in vars_}
pred=collections.Counter(); seclist=collections.defaultdict(list)
for v in vars_:
    if v.get('decl'): continue
    if v.get('art') or 'addr' not in v: continue
    s=sec_for(v['addr'])
    if not s: continue
    name=v.get('name') or v.get('spec')
    if not name: continue
    if name.startswith(SKIP): continue
    off=v['addr']-s[2]
    if off==0 and (s[0],name) not in objs: continue
    tv=byoff.get(v.get('specoff')) if v.get('spec') else v
    t=(tv or {}).get('type','')
    if not t: continue
    if re.search(r"\[\](\[\d+\])*\"\)$",t): continue  # incomplete array: size 0
    pred[(s[1],name,off)]+=1
ref=collections.Counter(); cursec=None
for l in open(paths['ref']):
    m=re.match(r"\[\d+\] DATASEC '([^']*)'",l)
    if m: cursec=m.group(1); continue
    m=re.match(r"\s+type_id=\d+ offset=(\d+) size=\d+ \(VAR '([^']*)'\)",l)
    if m and cursec: ref[(cursec,m.group(2),int(m.group(1)))]+=1
    elif not l.startswith('\t'): cursec=None
P=sum(pred.values()); R=sum(ref.values())
both=sum((pred&ref).values())
print('predicted',P,'reference',R,'both',both,'pred-only',sum((pred-ref).values()),'ref-only',sum((ref-pred).values()))
print('pred-only e.g.',list((pred-ref).items())[:12])
print('ref-only e.g.',list((ref-pred).items())[:12])

for p in paths.values():
    os.unlink(p)
os.rmdir(tmp)
