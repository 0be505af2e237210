"""Reading an image's header without Pillow, where that is exact.

Sending an image as it is needs only its size, mode and orientation. For the common PNG these
are in the chunks before its image data; reading them here costs a few microseconds where
Pillow's open costs tens, on every request. Anything this does not read exactly as Pillow does
is left to Pillow (None), so no image is judged differently.
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
