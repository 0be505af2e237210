"""Images: where they may come from, what they are, and how they are sent.

Records refer to images by `file://` URL; the bytes are read, checked and base64-encoded
only when a request is sent (`encode_image`), so pipes stay small and memory stays bounded
by the requests in flight. Formats are told from the bytes, never from the file name.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

from bv.errors import BadRecord

# Formats chat APIs accept as they are; anything else is converted to PNG before sending.
SENDABLE = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}
MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"\xff\xd8\xff", "JPEG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"BM", "BMP"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
)
# Images with more pixels are refused before decoding (decompression bombs).
MAX_IMAGE_PIXELS = 64_000_000
# Files bigger than this are not read as images at all (a path to /dev/zero, a huge file).
MAX_IMAGE_BYTES = 64 * 1024 * 1024


def sniff_format(head: bytes) -> str | None:
    """The image format told by the first bytes of a file, or None if it is not an image we know."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    for magic, name in MAGIC:
        if head.startswith(magic):
            return name
    return None


def resolve_image(path: str, root: Path, allow_any_path: bool = False) -> Path:
    """The real path of an item's image, confined to `root` unless `allow_any_path`.

    Symlinks are resolved before the check, so a link inside the dataset that points at
    ~/.ssh/id_rsa is refused like the path itself would be.
    """
    if "://" in path:
        raise BadRecord(f"image {path!r}: only local file paths are supported")
    if "\x00" in path:
        raise BadRecord(f"image {path!r}: a NUL byte in a file name")
    candidate = Path(path).expanduser() if allow_any_path else Path(path)
    if candidate.is_absolute() and not allow_any_path:
        raise BadRecord(f"image {path!r}: absolute paths are refused (use --allow-any-path to permit)")
    try:
        real = (root / candidate).resolve()  # follows every symlink that exists
    except (OSError, RuntimeError) as exc:
        raise BadRecord(f"image {path!r}: {exc}") from None
    # Confinement first: whether a file outside the root exists is none of the dataset's business.
    if not allow_any_path and not real.is_relative_to(root.resolve()):
        raise BadRecord(f"image {path!r}: resolves outside {root} (use --allow-any-path to permit)")
    if not real.exists():
        raise BadRecord(f"image {path!r}: file not found under {root}")
    try:
        with open_image(real) as f:
            head = f.read(16)
    except ImageError as exc:
        raise BadRecord(f"image {path!r}: {exc.why}") from None
    if sniff_format(head) is None:
        raise BadRecord(f"image {path!r}: not an image (PNG, JPEG, WebP, GIF, BMP or TIFF)")
    return real


def file_url(path: Path) -> str:
    return path.as_uri()


def path_of(url: str) -> Path:
    """The local path a `file://` URL names."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise ValueError(f"not a file URL: {url[:80]}")
    return Path(unquote(parsed.path))


@dataclass(frozen=True)
class ImageOptions:
    """How images are prepared for sending; part of the cache key, since it changes the bytes."""

    max_pixels: int | None = None


class ImageError(Exception):
    """An image that cannot be sent; an error for its item, not for the run."""

    def __init__(self, message: str, why: str | None = None) -> None:
        super().__init__(message)
        self.why = why or message  # the reason without the file name


def open_image(path: Path) -> BinaryIO:
    """Open an image file for reading: only a regular file of at most MAX_IMAGE_BYTES.

    Opened without blocking and checked on the open file, so a FIFO, a device such as
    /dev/zero, or a file swapped in after a check is refused at once instead of hanging or
    being read until memory runs out. Every image read in bv goes through here."""

    def refuse(why: str) -> ImageError:
        return ImageError(f"{path.name}: {why}", why)

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except ValueError:
        raise refuse("a NUL byte in the file name") from None
    except OSError as exc:
        raise refuse(f"unreadable ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise refuse("not a regular file")
        if info.st_size > MAX_IMAGE_BYTES:
            raise refuse(f"{info.st_size} bytes is over the image size limit of {MAX_IMAGE_BYTES}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _blocks(path: Path) -> Iterator[bytes]:
    """An image file's bytes in blocks (see `open_image`), never past MAX_IMAGE_BYTES even if it grows."""
    total = 0
    with open_image(path) as f:
        while block := f.read(1 << 20):
            total += len(block)
            if total > MAX_IMAGE_BYTES:
                raise ImageError(f"{path.name}: over the image size limit of {MAX_IMAGE_BYTES} bytes")
            yield block


def read_image(path: Path) -> bytes:
    """An image file's bytes, read as `open_image` allows."""
    return b"".join(_blocks(path))


def content_hash(path: Path) -> str:
    """sha256 of the file's bytes: what the cache key holds in place of the image."""
    digest = hashlib.sha256()
    for block in _blocks(path):
        digest.update(block)
    return digest.hexdigest()


def encode_image(path: Path, options: ImageOptions = ImageOptions()) -> str:
    """Read an image and return it as a data URI, converted and downscaled where needed."""
    data = read_image(path)
    fmt = sniff_format(data[:16])
    if fmt is None:
        raise ImageError(f"{path.name}: not an image")
    data, fmt = _prepare(data, fmt, options, path.name)
    return f"data:{SENDABLE[fmt]};base64,{base64.b64encode(data).decode('ascii')}"


def pillow() -> tuple[Any, Any]:
    """Pillow with just the plugins bv reads, registered; not every plugin Pillow knows."""
    from PIL import (  # noqa: F401 (importing a plugin registers it)
        BmpImagePlugin,
        GifImagePlugin,
        Image,
        ImageOps,
        JpegImagePlugin,
        PngImagePlugin,
        TiffImagePlugin,
        WebPImagePlugin,
    )

    Image.MAX_IMAGE_PIXELS = None  # our own check, on the header, before anything is decoded
    return Image, ImageOps


def _orientation(img: Any, fmt: str) -> int:
    """The EXIF orientation; for a PNG only if it carries EXIF, as Pillow decodes the whole
    image to look for it otherwise (that decode was most of the cost of sending a PNG)."""
    if fmt == "PNG" and "exif" not in img.info:
        return 1
    return img.getexif().get(0x0112, 1)


def _prepare(data: bytes, fmt: str, options: ImageOptions, name: str) -> tuple[bytes, str]:
    """Return bytes an API accepts: the original when it already is, else a PNG made with Pillow."""
    Image, ImageOps = pillow()
    try:
        with Image.open(io.BytesIO(data), formats=[fmt]) as img:
            width, height = img.size
            if width * height > MAX_IMAGE_PIXELS:
                raise ImageError(f"{name}: {width}x{height} pixels is over the limit (decompression bomb?)")
            orientation = _orientation(img, fmt)
            too_big = options.max_pixels is not None and width * height > options.max_pixels
            odd_mode = img.mode in ("P", "PA", "CMYK", "I;16", "I", "F", "1")
            if fmt in SENDABLE and orientation == 1 and not too_big and not odd_mode:
                return data, fmt
            img.load()
            out = ImageOps.exif_transpose(img) or img
            if out.mode not in ("RGB", "RGBA", "L", "LA"):
                out = out.convert("RGBA" if "A" in out.mode or "transparency" in out.info else "RGB")
            if too_big:
                scale = (options.max_pixels / (width * height)) ** 0.5
                out = out.resize(
                    (max(1, int(out.width * scale)), max(1, int(out.height * scale))),
                    Image.Resampling.LANCZOS,
                )
            buffer = io.BytesIO()
            out.save(buffer, "PNG")
            return buffer.getvalue(), "PNG"
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"{name}: cannot be decoded ({exc})") from None


def map_image_urls(messages: list[dict], replace: Callable[[Path], str]) -> list[dict]:
    """A copy of the messages with each `file://` image URL replaced by `replace(path)`."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:  # any shape: a plain string part, a part without a dict image_url
                is_image = isinstance(part, dict) and part.get("type") == "image_url"
                image = part.get("image_url") if is_image else None
                url = image.get("url") if isinstance(image, dict) else None
                if isinstance(url, str) and url.startswith("file:"):
                    part = {**part, "image_url": {**part["image_url"], "url": replace(path_of(url))}}
                parts.append(part)
            message = {**message, "content": parts}
        out.append(message)
    return out


def inline_images(messages: list[dict], options: ImageOptions = ImageOptions()) -> list[dict]:
    """The messages ready to send: each `file://` image replaced by its data URI."""
    return map_image_urls(messages, lambda path: encode_image(path, options))


def image_paths(messages: list[dict]) -> list[Path]:
    """The local image files the messages refer to."""
    paths: list[Path] = []

    def note(path: Path) -> str:
        paths.append(path)
        return ""

    map_image_urls(messages, note)
    return paths


# Below this many bytes of images a request is encoded on the event loop: a thread would cost
# more (hand-over and lock contention) than the encoding itself; above it, the loop stays free.
ENCODE_IN_LOOP_BYTES = 512 * 1024


async def inline_images_async(messages: list[dict], options: ImageOptions = ImageOptions()) -> list[dict]:
    """`inline_images`, in a worker thread when the images are big enough to stall the loop."""
    import asyncio

    try:
        size = sum(path.stat().st_size for path in image_paths(messages))
    except (OSError, ValueError):
        size = 0  # inline_images says what is wrong with the file
    if size < ENCODE_IN_LOOP_BYTES:
        return inline_images(messages, options)
    return await asyncio.to_thread(inline_images, messages, options)
