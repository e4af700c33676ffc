#!/usr/bin/env python3
"""Distinct colours of a PNG (8-bit RGB or RGBA, as Chromium writes screenshots).

Standard library only (zlib), so the browser test needs no imaging package.
Usage: png_colours.py FILE [--min N] [--has #rrggbb,...]   prints "WIDTHxHEIGHT COLOURS"; exits 1
when the picture has fewer than N distinct colours (a blank or nearly blank page), or lacks one
of the colours named with --has (flat fills render exactly, so a drawn map shows its palette).
"""
import struct
import sys
import zlib


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError(f"{path}: no IHDR chunk")
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace != 0:
        raise ValueError(f"{path}: only 8-bit non-interlaced RGB/RGBA is read (depth {depth}, type {colour_type})")
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev, at = [], bytearray(stride), 0
    for _ in range(height):
        kind = raw[at]
        line = bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            up_left = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def colours_of(rows, bpp):
    seen = set()
    for line in rows:
        for i in range(0, len(line), bpp):
            seen.add(bytes(line[i:i + 3]))
    return seen


def main(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    width, height, bpp, rows = read_png(argv[0])
    seen = colours_of(rows, bpp)
    print(f"{width}x{height} {len(seen)}")
    status = 0
    if "--min" in argv:
        want = int(argv[argv.index("--min") + 1])
        if len(seen) < want:
            print(f"{argv[0]}: only {len(seen)} distinct colours (want at least {want}): a blank page?", file=sys.stderr)
            status = 1
    if "--has" in argv:
        for hex_colour in argv[argv.index("--has") + 1].split(","):
            if bytes.fromhex(hex_colour.lstrip("#")) not in seen:
                print(f"{argv[0]}: colour {hex_colour} is not in the picture", file=sys.stderr)
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
