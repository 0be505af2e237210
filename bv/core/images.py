"""Images: where they may come from, what they are, and how they are sent.

Records refer to images by `file://` URL; the bytes are read, checked and base64-encoded
only when a request is sent (`encode_image`), so pipes stay small and memory stays bounded
by the requests in flight. Formats are told from the bytes, never from the file name.
"""

from __future__ import annotations

import binascii
import hashlib
import io
import os
import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

from bv.core.errors import BadRecord, BVError
from bv.core.image_header import HEADERS

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
        raise BadRecord(f"image {path!r}: absolute paths are refused (use `allow_any_path` to permit)")
    try:
        real = (root / candidate).resolve()  # follows every symlink that exists
    except (OSError, RuntimeError) as exc:
        raise BadRecord(f"image {path!r}: {exc}") from None
    # Confinement first: whether a file outside the root exists is none of the dataset's business.
    if not allow_any_path and not real.is_relative_to(root.resolve()):
        raise BadRecord(f"image {path!r}: resolves outside {root} (use `allow_any_path` to permit)")
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
    return Path(url_path(url))


# What makes a file URL's path need urllib and pathlib: %-escapes, a query or fragment, characters
# urlsplit drops, and the spellings pathlib normalises (//, /./, a trailing /).
_NOT_PLAIN = re.compile(r"[%?#\t\r\n]|//|/\.(?:/|\Z)|/\Z")


def url_path(url: str) -> str:
    """The local path a `file://` URL names, as a string: for the plain URLs bv prompt writes, the
    URL's own text (no urllib, no pathlib: this runs for every image of every request)."""
    if url.startswith("file:///") and not _NOT_PLAIN.search(url, 7):
        return url[7:]
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise ValueError(f"not a file URL: {url[:80]}")
    return str(Path(unquote(parsed.path)))


@dataclass(frozen=True)
class ImageOptions:
    """How images are prepared for sending; part of the cache key, since it changes the bytes."""

    max_pixels: int | None = None


class ImageError(BVError):
    """An image that cannot be sent; an error for its item, not for the run."""

    def __init__(self, message: str, why: str | None = None) -> None:
        super().__init__(message)
        self.why = why or message  # the reason without the file name


def _name(path: Path | str) -> str:
    return os.path.basename(path)


def open_image(path: Path | str) -> BinaryIO:
    """Open an image file for reading: only a regular file of at most MAX_IMAGE_BYTES.

    Opened without blocking and checked on the open file, so a FIFO, a device such as
    /dev/zero, or a file swapped in after a check is refused at once instead of hanging or
    being read until memory runs out. Every image read in bv goes through here."""
    return os.fdopen(_open_checked(path)[0], "rb")


def _open_checked(path: Path | str) -> tuple[int, os.stat_result]:
    """`open_image`'s descriptor and the open file's status."""

    def refuse(why: str) -> ImageError:
        return ImageError(f"{_name(path)}: {why}", why)

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
        return fd, info
    except BaseException:
        os.close(fd)
        raise


def _blocks(path: Path | str, opened: BinaryIO | None = None) -> Iterator[bytes]:
    """An image file's bytes in blocks (see `open_image`), never past MAX_IMAGE_BYTES even if it grows."""
    total = 0
    with opened or open_image(path) as f:
        while block := f.read(1 << 20):
            total += len(block)
            if total > MAX_IMAGE_BYTES:
                raise ImageError(f"{_name(path)}: over the image size limit of {MAX_IMAGE_BYTES} bytes")
            yield block


def read_image(path: Path | str, opened: BinaryIO | None = None) -> bytes:
    """An image file's bytes, read as `open_image` allows."""
    return b"".join(_blocks(path, opened))


def content_hash(path: Path | str) -> str:
    """sha256 of the file's bytes: what the cache key holds in place of the image."""
    digest = hashlib.sha256()
    for block in _blocks(path):
        digest.update(block)
    return digest.hexdigest()


def encode_image(path: Path | str, options: ImageOptions = ImageOptions()) -> str:
    """Read an image and return it as a data URI, converted and downscaled where needed."""
    return _encode(path, read_image(path), options)


def _encode(path: Path | str, data: bytes, options: ImageOptions) -> str:
    fmt = sniff_format(data[:16])
    if fmt is None:
        raise ImageError(f"{_name(path)}: not an image")
    data, fmt = _prepare(data, fmt, options, _name(path))
    head = f"data:{SENDABLE[fmt]};base64,".encode()
    return (head + binascii.b2a_base64(data, newline=False)).decode("ascii")


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


# Modes chat APIs may not take: converted to RGB(A) or L(A) before sending.
_ODD_MODES = ("P", "PA", "CMYK", "I;16", "I", "F", "1")


def _check_pixels(width: int, height: int, name: str) -> None:
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageError(f"{name}: {width}x{height} pixels is over the limit (decompression bomb?)")


def _as_is(fmt: str, pixels: int, mode: str, orientation: int, options: ImageOptions) -> bool:
    """Whether an image goes as it is: a format and mode APIs take, upright, not too big."""
    too_big = options.max_pixels is not None and pixels > options.max_pixels
    return fmt in SENDABLE and orientation == 1 and not too_big and mode not in _ODD_MODES


def _prepare(data: bytes, fmt: str, options: ImageOptions, name: str) -> tuple[bytes, str]:
    """Return bytes an API accepts: the original when it already is, else a PNG made with Pillow.
    A plain PNG, JPEG or WebP is judged from its header alone (bv.core.image_header); the rest by Pillow."""
    read_header = HEADERS.get(fmt)
    header = read_header(data) if read_header is not None else None
    if header is not None:
        width, height, mode = header
        _check_pixels(width, height, name)
        if _as_is(fmt, width * height, mode, 1, options):
            return data, fmt
    Image, ImageOps = pillow()
    try:
        with Image.open(io.BytesIO(data), formats=[fmt]) as img:
            width, height = img.size
            _check_pixels(width, height, name)
            if _as_is(fmt, width * height, img.mode, _orientation(img, fmt), options):
                return data, fmt
            too_big = options.max_pixels is not None and width * height > options.max_pixels
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


class EncodedImages:
    """The data URIs of a run's images, kept (up to `budget` characters, least recently used out
    first) so that an image sent again, by an item's repeats, its later turns or another item, is
    not read, checked and encoded again. Keyed by the file's identity and version (device, inode,
    size, mtime, ctime) and the options: an edited or replaced file is read anew. Big images are
    not kept (the memory of a run stays bounded by the requests in flight)."""

    def __init__(self, budget: int = 8 * 1024 * 1024, largest: int = 1024 * 1024) -> None:
        self.budget, self.largest = budget, largest
        self._kept: OrderedDict[tuple, str] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()  # big images are encoded in worker threads

    def __call__(
        self, path: str, options: ImageOptions, opened: tuple[int, os.stat_result] | None = None
    ) -> str:
        """The image's data URI; `opened`: its descriptor and status from `_open_checked`, which
        this call closes (else the file is opened here)."""
        fd, info = opened or _open_checked(path)
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, options)
        with self._lock:
            uri = self._kept.get(key)
            if uri is not None:
                self._kept.move_to_end(key)
        if uri is not None:
            os.close(fd)
            return uri
        try:
            data = _read_opened(fd, info.st_size, path)
        finally:
            os.close(fd)
        uri = _encode(path, data, options)
        if len(uri) <= self.largest:
            with self._lock:
                if key not in self._kept:
                    self._kept[key] = uri
                    self._size += len(uri)
                while self._size > self.budget:
                    self._size -= len(self._kept.popitem(last=False)[1])
        return uri


def _read_opened(fd: int, size: int, path: str) -> bytes:
    """The bytes of a file `_open_checked` opened, `size` its status said: read straight from the
    descriptor (a buffered file object read it in 1 MB blocks, and then once more for the end),
    never past MAX_IMAGE_BYTES, and no further than `size` (the version the status names)."""
    parts, total = [], 0
    while total < size:
        block = os.read(fd, size - total)
        if not block:
            break  # the file shrank since its status: what is there
        parts.append(block)
        total += len(block)
    if total > MAX_IMAGE_BYTES:  # never: `size` is checked against it when opened
        raise ImageError(f"{_name(path)}: over the image size limit of {MAX_IMAGE_BYTES} bytes")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _image_urls(messages: list[dict]) -> list[tuple[int, int, str]]:
    """(message, part, url) of each `file://` image of the messages, in order; any shape is
    tolerated (a plain string part, a part without a dict image_url)."""
    found = []
    for m, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list):
            for p, part in enumerate(content):
                if isinstance(part, dict) and part.get("type") == "image_url":
                    image = part.get("image_url")
                    url = image.get("url") if isinstance(image, dict) else None
                    if isinstance(url, str) and url.startswith("file:"):
                        found.append((m, p, url))
    return found


def _with_urls(messages: list[dict], found: list[tuple[int, int, str]], urls: list[str]) -> list[dict]:
    """A copy of the messages with the found image URLs replaced by `urls`, copying only what changes."""
    out = list(messages)
    for (m, p, _), url in zip(found, urls, strict=True):
        if out[m] is messages[m]:
            out[m] = {**messages[m], "content": list(messages[m]["content"])}
        part = out[m]["content"][p]
        out[m]["content"][p] = {**part, "image_url": {**part["image_url"], "url": url}}
    return out


def map_image_urls(messages: list[dict], replace: Callable[[Path], str]) -> list[dict]:
    """A copy of the messages with each `file://` image URL replaced by `replace(path)`."""
    found = _image_urls(messages)
    return _with_urls(messages, found, [replace(path_of(url)) for _, _, url in found])


def inline_images(
    messages: list[dict], options: ImageOptions = ImageOptions(), encoded: EncodedImages | None = None
) -> list[dict]:
    """The messages ready to send: each `file://` image replaced by its data URI."""
    found = _image_urls(messages)
    encode = encoded or (lambda path, options: encode_image(path, options))
    return _with_urls(messages, found, [encode(url_path(url), options) for _, _, url in found])


def image_paths(messages: list[dict]) -> list[Path]:
    """The local image files the messages refer to."""
    return [path_of(url) for _, _, url in _image_urls(messages)]


# Below this many bytes of images a request is encoded on the event loop: a thread would cost
# more (hand-over and lock contention) than the encoding itself; above it, the loop stays free.
ENCODE_IN_LOOP_BYTES = 512 * 1024


async def inline_images_async(
    messages: list[dict], options: ImageOptions = ImageOptions(), encoded: EncodedImages | None = None
) -> list[dict]:
    """`inline_images`, in a worker thread when the images are big enough to stall the loop. Each
    image is opened once: its status gives both the size that decides where it is encoded and the
    key of the run's kept data URIs (a separate `stat` per image and request cost more than the
    rest of the look-up)."""
    found = _image_urls(messages)
    if not found:
        return messages
    encoded = encoded or EncodedImages()
    paths = [url_path(url) for _, _, url in found]
    opened = _open_all(paths)
    if sum(info.st_size for _, info in opened) >= ENCODE_IN_LOOP_BYTES:
        _close_all(opened)  # the thread opens them again (a hand-over cancelled first would leak them)
        import asyncio

        return await asyncio.to_thread(inline_images, messages, options, encoded)
    uris: list[str] = []
    try:
        for path, opened_image in zip(paths, opened, strict=True):
            uris.append(encoded(path, options, opened_image))
    finally:
        _close_all(opened[len(uris) + 1 :])  # each one `encoded` was handed it closed
    return _with_urls(messages, found, uris)


def _open_all(paths: list[str]) -> list[tuple[int, os.stat_result]]:
    """Each path opened by `_open_checked`; if one cannot be, those opened are closed again."""
    opened: list[tuple[int, os.stat_result]] = []
    try:
        for path in paths:
            opened.append(_open_checked(path))
    except BaseException:
        _close_all(opened)
        raise
    return opened


def _close_all(opened: list[tuple[int, os.stat_result]]) -> None:
    for fd, _ in opened:
        os.close(fd)
