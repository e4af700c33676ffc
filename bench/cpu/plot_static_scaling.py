#!/usr/bin/env python3
"""SVG chart of the static path's time against tokens (bench_exec_cpu --static-scaling JSON).
Log-log axes with a dashed line of slope 1 through the 1M-token point: linear growth lies on it.
    python3 bench/cpu/plot_static_scaling.py IN.json OUT.svg"""
import json
import math
import sys

rows = json.load(open(sys.argv[1]))["static_scaling"]
pts = [(r["padded_tokens"], r["load_s"] + r["convert_static_s"]) for r in rows]
W, H, L, R, T, B = 640, 400, 70, 20, 40, 50
x0, x1 = math.log10(min(p[0] for p in pts)) - 0.1, math.log10(max(p[0] for p in pts)) + 0.1
y0, y1 = math.log10(min(p[1] for p in pts)) - 0.2, math.log10(max(p[1] for p in pts)) + 0.2
sx = lambda v: L + (math.log10(v) - x0) / (x1 - x0) * (W - L - R)
sy = lambda v: H - B - (math.log10(v) - y0) / (y1 - y0) * (H - T - B)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W/2}" y="20" text-anchor="middle" font-size="14">attn-doctor static path: load + replay + all static checks</text>']
for e in range(math.ceil(x0), math.floor(x1) + 1):
    x = sx(10 ** e)
    out.append(f'<line x1="{x}" y1="{T}" x2="{x}" y2="{H-B}" stroke="#ddd"/><text x="{x}" y="{H-B+16}" text-anchor="middle">1e{e}</text>')
for e in range(math.ceil(y0), math.floor(y1) + 1):
    y = sy(10 ** e)
    out.append(f'<line x1="{L}" y1="{y}" x2="{W-R}" y2="{y}" stroke="#ddd"/><text x="{L-6}" y="{y+4}" text-anchor="end">1e{e} s</text>')
ref_n, ref_t = min(pts, key=lambda p: abs(p[0] - 2 ** 20))
lin = [(n, ref_t * n / ref_n) for n, _ in (pts[0], pts[-1])]
out.append(f'<line x1="{sx(lin[0][0])}" y1="{sy(lin[0][1])}" x2="{sx(lin[1][0])}" y2="{sy(lin[1][1])}" stroke="#999" stroke-dasharray="5,4"/>')
out.append('<polyline fill="none" stroke="#1f5fa8" stroke-width="2" points="' + " ".join(f"{sx(n):.1f},{sy(t):.1f}" for n, t in pts) + '"/>')
for n, t in pts:
    out.append(f'<circle cx="{sx(n):.1f}" cy="{sy(t):.1f}" r="3.5" fill="#1f5fa8"><title>{n} tokens: {t*1000:.2f} ms</title></circle>')
out.append(f'<text x="{W/2}" y="{H-12}" text-anchor="middle">padded tokens (B x 4096, mask and cu_seqlens from .npy)</text>')
out.append(f'<text x="{L+10}" y="{T+16}" fill="#1f5fa8">measured (best of 3)</text><text x="{L+10}" y="{T+32}" fill="#777">slope 1 (linear) through 1M tokens</text>')
out.append("</svg>")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
