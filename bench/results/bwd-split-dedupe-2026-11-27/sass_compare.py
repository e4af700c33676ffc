#!/usr/bin/env python3
"""Per kernel and SASS image, before vs after: registers, stack and local memory
(cuobjdump -res-usage), the instruction count and the STL / LDL count of the listing
(cuobjdump -sass), and whether the listings are identical (instructions and operands, the
encodings left out). Usage: sass_compare.py BEFORE_DIR AFTER_DIR, each holding NAME.res and
NAME.sass per object (run.sh writes them)."""
import re, sys, os, glob
def parse_res(path):
    out = {}; arch = None
    for line in open(path):
        m = re.match(r'arch = (sm_\d+a?)', line)
        if m: arch = m.group(1).rstrip('a')
        m = re.match(r'\s*Function (\S+):', line)
        if m: fn = m.group(1)
        m = re.match(r'\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)', line)
        if m: out[(arch, fn)] = tuple(int(x) for x in m.groups())
    return out
def parse_sass(path):
    out = {}; arch = None; fn = None
    for line in open(path):
        m = re.match(r'\s*code for (sm_\d+a?)', line)
        if m: arch = m.group(1).rstrip('a'); continue
        m = re.match(r'\s*Function : (\S+)', line)
        if m: fn = m.group(1); out[(arch, fn)] = []; continue
        m = re.match(r'\s*/\*[0-9a-f]{4,}\*/\s+(.*?);', line)
        if m and fn: out[(arch, fn)].append(m.group(1).strip())
    return out
def short(fn):
    m = re.search(r'bwd\d+(\w+?_kernel)I(\w+?)(Li.*)E', fn)
    if not m: return fn[:60]
    t = 'bf16' if 'bfloat16' in m.group(2) else 'fp16'
    args = re.findall(r'Li(\d+)E|Lb(\d)E', m.group(3))
    a = ','.join(x or ('chk' if y == '1' else 'unc') for x, y in args)
    return f'{m.group(1)}<{t},{a}>'
def norm(ins):
    return [re.sub(r'0x[0-9a-f]+', 'X', i) for i in ins]
before, after = sys.argv[1], sys.argv[2]
print('| object | image | kernel | REG | STACK | LOCAL | instructions | STL / LDL | SASS |')
print('|---|---|---|---|---|---|---|---|---|')
for bres in sorted(glob.glob(os.path.join(before, '*.res'))):
    name = os.path.basename(bres)[:-4]
    ares = os.path.join(after, name + '.res')
    rb, ra = parse_res(bres), parse_res(ares)
    sb, sa = parse_sass(os.path.join(before, name + '.sass')), parse_sass(os.path.join(after, name + '.sass'))
    for key in sorted(set(sb) | set(sa)):
        arch, fn = key
        b, a = sb.get(key, []), sa.get(key, [])
        def cell(x, y): return str(x) if x == y else f'{x} -> {y}'
        r1, r2 = rb.get(key, (None,)*4), ra.get(key, (None,)*4)
        spill = lambda l: (sum(i.split()[0].startswith('STL') or (len(i.split())>1 and i.split()[1].startswith('STL')) for i in l),
                           sum(i.split()[0].startswith('LDL') or (len(i.split())>1 and i.split()[1].startswith('LDL')) for i in l))
        if 'wgmma' in name: arch = 'sm_90a'  # its only image; CUDA 12's cuobjdump prints sm_90
        same = 'identical' if b == a else ('same but addresses' if norm(b) == norm(a) else 'differs')
        print(f'| {name} | {arch} | {short(fn)} | {cell(r1[0], r2[0])} | {cell(r1[1], r2[1])} | {cell(r1[3], r2[3])} | '
              f'{cell(len(b), len(a))} | {cell("%d / %d" % spill(b), "%d / %d" % spill(a))} | {same} |')
