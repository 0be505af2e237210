"""The fast paths of sending images agree with the slow ones: a PNG, JPEG or WebP judged from its
header as Pillow judges it, file URLs read without urllib as urllib reads them, a run's encoded
images kept per file version, and request bodies made by orjson the JSON of the request."""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from PIL import Image, PngImagePlugin

from bv.core.image_header import jpeg_header, png_header, webp_header
from bv.core.images import (
    EncodedImages,
    ImageError,
    ImageOptions,
    encode_image,
    inline_images,
    inline_images_async,
    url_path,
)
from bv.engine.backends.openai_compat import body_json


def png(mode: str = "RGB", **save: object) -> bytes:
    return saved(mode, "PNG", **save)


def saved(mode: str, fmt: str, **save: object) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (37, 23), "red" if mode not in ("1", "L", "I;16", "P") else 1).save(buffer, fmt, **save)
    return buffer.getvalue()


def pillow_reads(data: bytes, fmt: str = "PNG") -> tuple[int, int, str, bool]:
    with Image.open(io.BytesIO(data), formats=[fmt]) as image:
        return image.size[0], image.size[1], image.mode, image.getexif().get(0x0112, 1) != 1


def text_chunks(*pairs: tuple[str, str]) -> PngImagePlugin.PngInfo:
    info = PngImagePlugin.PngInfo()
    for key, value in pairs:
        info.add_text(key, value)
    return info


exif = Image.Exif()
exif[0x0112] = 6
HEADER_READ = {  # PNGs whose header alone decides
    "L": png("L"),
    "LA": png("LA"),
    "RGB": png("RGB"),
    "RGBA": png("RGBA"),
    "1": png("1"),
    "I;16": png("I;16"),
    "dpi": png(dpi=(72, 72)),
    "text": png(pnginfo=text_chunks(("Software", "x"))),
}
LEFT_TO_PILLOW = {  # EXIF, palettes, profiles, animation: Pillow reads these
    "palette": png("P"),
    "exif chunk": png(exif=exif),
    "exif text": png(pnginfo=text_chunks(("exif", "y"))),
    "transparency": png(transparency=(1, 2, 3)),
    "icc": png(icc_profile=b"abc"),
}


@pytest.mark.parametrize("name", HEADER_READ)
def test_png_header_reads_what_pillow_reads(name):
    data = HEADER_READ[name]
    width, height, mode, rotated = pillow_reads(data)
    assert png_header(data) == (width, height, mode) and not rotated


@pytest.mark.parametrize("name", LEFT_TO_PILLOW)
def test_png_header_leaves_the_rest_to_pillow(name):
    assert png_header(LEFT_TO_PILLOW[name]) is None


def webp_alpha() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGBA", (37, 23), (255, 0, 0, 128)).save(buffer, "WEBP")
    return buffer.getvalue()


JPEGS = {  # name: (bytes, whether the header alone decides)
    "RGB": (saved("RGB", "JPEG"), True),
    "L": (saved("L", "JPEG"), True),
    "progressive": (saved("RGB", "JPEG", progressive=True), True),
    "dpi and comment": (saved("RGB", "JPEG", dpi=(300, 300), comment=b"hi"), True),
    "no subsampling": (saved("RGB", "JPEG", subsampling=0, quality=100), True),
    "CMYK": (saved("CMYK", "JPEG"), False),
    "EXIF orientation": (saved("RGB", "JPEG", exif=exif), False),
    "ICC profile": (saved("RGB", "JPEG", icc_profile=b"x" * 20), False),
}
WEBPS = {
    "lossy": (saved("RGB", "WEBP"), True),
    "lossless": (saved("RGB", "WEBP", lossless=True), False),
    "alpha": (webp_alpha(), False),
    "EXIF": (saved("RGB", "WEBP", exif=exif), False),
}


@pytest.mark.parametrize("fmt,name", [("JPEG", n) for n in JPEGS] + [("WEBP", n) for n in WEBPS])
def test_jpeg_and_webp_headers_read_what_pillow_reads(fmt, name):
    data, decided = (JPEGS if fmt == "JPEG" else WEBPS)[name]
    header = (jpeg_header if fmt == "JPEG" else webp_header)(data)
    width, height, mode, rotated = pillow_reads(data, fmt)
    if decided is False:
        assert header is None
    if decided is True:
        assert header == (width, height, mode) and not rotated
    if header is not None:  # whatever is read from the header is what Pillow reads
        assert header == (width, height, mode) and not rotated


@pytest.mark.parametrize("fmt", ["JPEG", "WEBP"])
def test_broken_jpeg_and_webp_are_left_to_pillow(tmp_path, fmt):
    good = saved("RGB", fmt)
    header = jpeg_header if fmt == "JPEG" else webp_header
    assert header(good[:60]) is None and header(good + b"\0\0" if fmt == "WEBP" else good[:-900]) is None
    path = tmp_path / "broken"
    path.write_bytes(good[:60])
    with pytest.raises(ImageError, match="cannot be decoded"):
        encode_image(path)


def test_broken_png_header_still_refused(tmp_path):
    good = png()
    bad_checksum = good[:29] + bytes([good[29] ^ 1]) + good[30:]  # IHDR's CRC
    assert png_header(bad_checksum) is None and png_header(good[:30]) is None
    path = tmp_path / "broken.png"
    path.write_bytes(bad_checksum)
    with pytest.raises(ImageError, match="cannot be decoded"):
        encode_image(path)


@pytest.mark.parametrize(
    "url",
    [
        "file:///data/images/1.png",
        "file:///data/my%20images/%C3%A9.png",
        "file:///data//images/./1.png",
        "file:///data/images/",
        "file:///data/a?b#c",
        "file://host/data/1.png",
        "file:relative.png",
    ],
)
def test_file_url_paths_as_urllib_reads_them(url):
    assert url_path(url) == str(Path(unquote(urlparse(url).path)))


def test_a_runs_images_are_encoded_once_per_file_version(tmp_path):
    path = tmp_path / "a.png"
    path.write_bytes(png())
    images = EncodedImages()
    first = images(str(path), ImageOptions())
    assert first == encode_image(path)
    assert images(str(path), ImageOptions()) is first  # kept, not read again
    assert images(str(path), ImageOptions(max_pixels=10)) is not first  # options are in the key
    path.write_bytes(png("L"))  # edited: read anew
    os.utime(path, ns=(1, 1))
    assert images(str(path), ImageOptions()) == encode_image(path) != first
    path.unlink()
    with pytest.raises(ImageError, match="unreadable"):  # a file gone is an error, not a stale hit
        images(str(path), ImageOptions())


def test_kept_images_stay_within_their_budget(tmp_path):
    images = EncodedImages(budget=300, largest=200)
    for i in range(5):
        path = tmp_path / f"{i}.png"
        path.write_bytes(png())
        images(str(path), ImageOptions())
    assert images._size <= 300 and len(images._kept) < 5
    big = tmp_path / "big.png"
    Image.effect_noise((40, 40), 50).save(big)  # its data URI is over `largest`
    images(str(big), ImageOptions())
    assert all(len(uri) <= 200 for uri in images._kept.values())


def test_request_body_is_the_json_of_the_request(tmp_path):
    path = tmp_path / "a.png"
    path.write_bytes(png())
    url = path.as_uri()
    messages = [
        {"role": "system", "content": 'rules with "quotes", \\ and ünïcode'},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "compare"},
                {"type": "image_url", "image_url": {"url": url, "detail": "high"}},
                "a plain string part",
                {"type": "image_url", "image_url": {"url": url}},
            ],
        },
    ]
    sendable = inline_images(messages, ImageOptions(), EncodedImages())
    body = {"model": "m", "messages": sendable, "max_tokens": 5}
    assert json.loads(body_json(body)) == body
    assert body["messages"][1]["content"][3]["image_url"]["url"] == encode_image(path)
    odd = {"model": "m", "messages": [{"role": "user", "content": "lone \ud800"}], "seed": 2**70}
    assert body_json(odd) == json.dumps(odd).encode()  # what orjson refuses, json.dumps writes


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files in /proc")
def test_a_request_whose_image_cannot_be_sent_leaves_no_file_open(tmp_path):
    good, bad = tmp_path / "a.png", tmp_path / "folder.png"
    good.write_bytes(png())
    bad.mkdir()
    images = EncodedImages()

    def message(*paths: Path) -> list[dict]:
        parts = [{"type": "image_url", "image_url": {"url": p.as_uri()}} for p in paths]
        return [{"role": "user", "content": parts}]

    before = len(os.listdir("/proc/self/fd"))
    for order in [(good, bad), (bad, good), (good, good, bad)]:
        with pytest.raises(ImageError, match="not a regular file"):
            asyncio.run(inline_images_async(message(*order), ImageOptions(), images))
    sent = asyncio.run(inline_images_async(message(good, good), ImageOptions(), images))
    assert [part["image_url"]["url"] for part in sent[0]["content"]] == [encode_image(good)] * 2
    assert len(os.listdir("/proc/self/fd")) == before
