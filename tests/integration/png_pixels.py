#!/usr/bin/env python3
"""png_pixels.py FILE [X,Y ...]: read an 8-bit RGB/RGBA PNG with the
standard library only (zlib), print its size and count of distinct colours,
then the colour of each pixel asked for, one line each:
    size 800 600
    colours 1234
    500,300 51 115 255
Used by test_love.sh to check a screenshot is not blank and shows the game."""
import struct, sys, zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, head = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, ctype, _, _, interlace = head
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise SystemExit(f"{path}: only 8-bit RGB/RGBA, non-interlaced PNGs (got depth {depth} type {ctype})")
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def main():
    width, height, bpp, rows = read_png(sys.argv[1])
    print("size", width, height)
    colours = set()
    for line in rows:
        for x in range(0, width * bpp, bpp):
            colours.add(bytes(line[x:x + 3]))
    print("colours", len(colours))
    for spec in sys.argv[2:]:
        x, y = (int(v) for v in spec.split(","))
        px = rows[y][x * bpp:x * bpp + 3]
        print(spec, *px)


main()
