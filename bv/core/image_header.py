"""Reading an image's header without Pillow, where that is exact.

Sending an image as it is needs only its size, mode and orientation. For the common PNG, JPEG
and lossy WebP these are in the header; reading them here costs a few microseconds where
Pillow's open costs tens on every request (and importing Pillow 0.1 s). Anything this does not
read exactly as Pillow does is left to Pillow (None), so no image is judged differently.
"""

from __future__ import annotations

import struct
import zlib

# PNG (bit depth, colour type) -> the mode Pillow opens it in (PIL.PngImagePlugin._MODES).
_PNG_MODES = {(1, 0): "1", (2, 0): "L", (4, 0): "L", (8, 0): "L", (16, 0): "I;16", (8, 2): "RGB"}
_PNG_MODES.update({(16, 2): "RGB", (8, 4): "LA", (16, 4): "RGBA", (8, 6): "RGBA", (16, 6): "RGBA"})
_PNG_MODES.update({(depth, 3): "P" for depth in (1, 2, 4, 8)})
# Chunks before the image data that Pillow reads without effect on sending the file as it is, with
# the least length it accepts; a tEXt chunk keyed `exif` carries EXIF and goes to Pillow.
_PNG_PLAIN_CHUNKS = {b"sRGB": 1, b"gAMA": 4, b"pHYs": 9, b"cHRM": 32, b"tEXt": 0}


def png_header(data: bytes) -> tuple[int, int, str] | None:
    """A PNG's (width, height, mode) from its header, without Pillow, when every chunk before the
    image data is one Pillow would read the same way with its checksum right (no EXIF, no palette,
    no animation); None otherwise, and Pillow reads it (and refuses what is broken)."""
    if data[8:16] != b"\x00\x00\x00\x0dIHDR" or len(data) < 33:
        return None
    width, height, depth, color, _, filter_method, _ = struct.unpack_from(">IIBBBBB", data, 16)
    mode = _PNG_MODES.get((depth, color))
    if mode is None or filter_method or not width or not height:
        return None
    pos = 8
    while pos + 12 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        if kind == b"IDAT":
            return width, height, mode
        end = pos + 8 + length
        if end + 4 > len(data) or (pos > 8 and length < _PNG_PLAIN_CHUNKS.get(kind, 1 << 32)):
            return None
        if kind == b"tEXt" and data[pos + 8 : end].split(b"\0", 1)[0] == b"exif":
            return None
        if zlib.crc32(data[pos + 4 : end]) != int.from_bytes(data[end : end + 4], "big"):
            return None
        pos = end + 4
    return None


# JPEG markers read here, as Pillow reads them: SOF0-2 (size, layers), and segments that do not
# change sending the file as it is (JFIF, tables, restart interval, comments). APP1 (EXIF, XMP:
# orientation), Adobe, ICC, MPF and the rarer frames are left to Pillow.
_SOF = (0xC0, 0xC1, 0xC2)
_JPEG_PLAIN = (0xC4, 0xDB, 0xDD, 0xE0, 0xFE)


def jpeg_header(data: bytes) -> tuple[int, int, str] | None:
    """A JPEG's (width, height, mode) from its markers up to the first scan, without Pillow, when
    each is one Pillow reads the same way (see above); None otherwise, for Pillow to read."""
    if data[:3] != b"\xff\xd8\xff":
        return None
    pos, size = 2, None
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        segment = data[pos + 4 : pos + 2 + length]
        if length < 2 or len(segment) != length - 2:
            return None
        if marker == 0xDA:  # start of scan: the header is over
            return size
        if marker in _SOF:
            if size is not None or len(segment) < 6 or segment[0] != 8 or segment[5] not in (1, 3):
                return None
            height, width = int.from_bytes(segment[1:3], "big"), int.from_bytes(segment[3:5], "big")
            if not width or not height:
                return None
            size = width, height, "L" if segment[5] == 1 else "RGB"
        elif marker not in _JPEG_PLAIN:
            return None
        elif marker == 0xE0 and segment.startswith(b"JFIF") and len(segment) < 14:
            return None  # Pillow fails on a short JFIF header
        elif marker == 0xDB and not _tables_whole(segment):
            return None
        pos += 2 + length
    return None


def _tables_whole(segment: bytes) -> bool:
    """Whether a DQT segment holds whole quantisation tables (Pillow refuses it otherwise)."""
    while segment:
        length = 1 + (64 if segment[0] < 16 else 128)
        if len(segment) < length:
            return False
        segment = segment[length:]
    return True


def webp_header(data: bytes) -> tuple[int, int, str] | None:
    """A simple lossy WebP's (width, height, mode): one `VP8 ` chunk filling the RIFF container
    exactly, its key-frame header checked as libwebp checks it; None for anything else (lossless,
    extended with alpha, EXIF or animation, trailing bytes), for Pillow to read."""
    if len(data) < 30 or data[:4] != b"RIFF" or data[8:16] != b"WEBPVP8 ":
        return None
    riff_size = int.from_bytes(data[4:8], "little")
    chunk_size = int.from_bytes(data[16:20], "little")
    if riff_size + 8 != len(data) or 20 + chunk_size + (chunk_size & 1) != len(data):
        return None
    bits = int.from_bytes(data[20:23], "little")
    key_frame, profile, shown, partition = not bits & 1, (bits >> 1) & 7, (bits >> 4) & 1, bits >> 5
    if not key_frame or profile > 3 or not shown or partition >= chunk_size or data[23:26] != b"\x9d\x01\x2a":
        return None
    width = int.from_bytes(data[26:28], "little") & 0x3FFF
    height = int.from_bytes(data[28:30], "little") & 0x3FFF
    return (width, height, "RGB") if width and height else None


HEADERS = {"PNG": png_header, "JPEG": jpeg_header, "WEBP": webp_header}
