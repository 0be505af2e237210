"""Images are checked and converted from their bytes before sending: formats, modes, EXIF, size, bombs."""

from __future__ import annotations

import base64
import io
import struct
import zlib

import pytest
from PIL import Image

from bv.core.images import ImageError, ImageOptions, encode_image


def decode(data_uri: str) -> tuple[str, Image.Image]:
    header, data = data_uri.split(",", 1)
    return header, Image.open(io.BytesIO(base64.b64decode(data)))


@pytest.mark.parametrize("fmt,mime", [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")])
def test_sendable_formats_pass_unchanged(tmp_path, fmt, mime):
    path = tmp_path / "x.bin"  # the name says nothing; the bytes do
    Image.new("RGB", (30, 20), "green").save(path, fmt)
    assert encode_image(path) == f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


@pytest.mark.parametrize(
    "fmt,mode",
    [("GIF", "RGB"), ("BMP", "RGB"), ("TIFF", "RGB"), ("PNG", "P"), ("TIFF", "CMYK"), ("JPEG", "CMYK")],
)
def test_formats_and_modes_apis_reject_become_png(tmp_path, fmt, mode):
    path = tmp_path / "img"
    image = Image.new("RGB", (30, 20), (200, 30, 40)).convert(mode)
    image.save(path, fmt)
    header, decoded = decode(encode_image(path))
    assert header == "data:image/png;base64" and decoded.format == "PNG"
    assert decoded.mode in ("RGB", "RGBA", "L", "LA") and decoded.size == (30, 20)


def test_exif_orientation_is_applied(tmp_path):
    path = tmp_path / "photo.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    Image.new("RGB", (40, 20), "white").save(path, "JPEG", exif=exif)
    _, decoded = decode(encode_image(path))
    assert decoded.size == (20, 40)


def test_max_pixels_downscales_keeping_aspect(tmp_path):
    path = tmp_path / "big.png"
    Image.new("RGB", (400, 300), "white").save(path)
    _, decoded = decode(encode_image(path, ImageOptions(max_pixels=30_000)))
    width, height = decoded.size
    assert width * height <= 30_000 and abs(width / height - 4 / 3) < 0.02
    small = tmp_path / "small.png"
    Image.new("RGB", (100, 100), "white").save(small)
    assert encode_image(small, ImageOptions(max_pixels=30_000)).startswith("data:image/png")
    assert decode(encode_image(small, ImageOptions(max_pixels=30_000)))[1].size == (100, 100)


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims huge dimensions: what a decompression bomb looks like before decoding."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("side", [10_000, 30_000])  # over our limit; over Pillow's own too
def test_decompression_bomb_is_refused_for_that_item(tmp_path, side):
    path = tmp_path / "bomb.png"
    path.write_bytes(png_header_only(side, side))
    with pytest.raises(ImageError, match="decompression bomb"):
        encode_image(path)


def test_corrupt_image_is_an_item_error(tmp_path):
    path = tmp_path / "broken.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    with pytest.raises(ImageError):
        encode_image(path, ImageOptions(max_pixels=10))


def test_png_orientation_only_when_it_has_exif(tmp_path):
    rotated = tmp_path / "rotated.png"
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.new("RGB", (40, 20), "white").save(rotated, "PNG", exif=exif)
    assert decode(encode_image(rotated))[1].size == (20, 40)
    plain = tmp_path / "plain.png"
    Image.new("RGB", (40, 20), "white").save(plain, "PNG")
    assert encode_image(plain) == "data:image/png;base64," + base64.b64encode(plain.read_bytes()).decode()
