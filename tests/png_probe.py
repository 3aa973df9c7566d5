#!/usr/bin/env python3
"""Prints a PNG's size, then the RGB colour at each x,y given: what the SVG tests check.

Usage: png_probe.py FILE.png [X,Y ...]   (8-bit RGB or RGBA, not interlaced: what rsvg-convert writes)
"""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                sys.exit(f"{path}: unsupported PNG (depth {depth}, colour type {color}, interlace {interlace})")
            bpp = 4 if color == 6 else 3
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def main():
    width, height, bpp, rows = read_png(sys.argv[1])
    print(width, height)
    for arg in sys.argv[2:]:
        x, y = (int(float(v)) for v in arg.split(","))
        if not (0 <= x < width and 0 <= y < height):
            print("outside")
            continue
        px = rows[y][x * bpp:x * bpp + 3]
        alpha = rows[y][x * bpp + 3] if bpp == 4 else 255
        # Composite on white, as a viewer shows it.
        print(" ".join(str((v * alpha + 255 * (255 - alpha)) // 255) for v in px))


main()
