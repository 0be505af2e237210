"""The images of `bv report --html`: each distinct image (by content) read once, within the size
limits, and embedded as a small WebP (or JPEG) data URI."""

from __future__ import annotations

import base64
import hashlib
import io
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bv.core.images import MAX_IMAGE_PIXELS, ImageError, pillow, read_image, sniff_format

THUMB_PX = 320  # longest side of an embedded thumbnail


QUALITY = 70


def _thumbnail(data: bytes) -> tuple[int, int, str] | None:
    """(width, height, data URI) of a downscaled WebP (JPEG without WebP support), None if undecodable."""
    from PIL import features

    Image, ImageOps = pillow()
    fmt = sniff_format(data[:16])
    if fmt is None:
        return None
    try:
        with Image.open(io.BytesIO(data), formats=[fmt]) as img:
            if img.width * img.height > MAX_IMAGE_PIXELS:
                return None
            img.draft("RGB", (2 * THUMB_PX, 2 * THUMB_PX))  # JPEG: decode at a reduced scale
            out = ImageOps.exif_transpose(img) or img
            webp = features.check("webp")
            alpha = webp and ("A" in out.mode or "transparency" in out.info)
            out = out.convert("RGBA" if alpha else "RGB")
            out.thumbnail((THUMB_PX, THUMB_PX))
            buffer = io.BytesIO()
            if webp:
                out.save(buffer, "WEBP", quality=QUALITY, method=2)
            else:
                out.save(buffer, "JPEG", quality=QUALITY, optimize=True)
    except (OSError, ValueError, SyntaxError):
        return None
    uri = f"data:image/{'webp' if webp else 'jpeg'};base64,{base64.b64encode(buffer.getvalue()).decode()}"
    return out.width, out.height, uri


class Thumbnails:
    """Each distinct image (by content) encoded once, in parallel, as a downscaled data URI."""

    def __init__(self, paths: Iterable[str], refused: Iterable[str] = ()) -> None:
        self.refused = set(refused)  # outside the image roots: never opened

        def read(path: str) -> tuple[str, bytes] | None:
            file = Path(path)
            if not file.is_absolute():  # relative paths (no file:// URL in the row) cannot be resolved here
                return None
            try:  # regular files only, never past the size limit (a FIFO or /dev/zero: no image)
                data = read_image(file)
            except ImageError:
                return None
            return hashlib.sha256(data).hexdigest()[:16], data

        unique = sorted(set(paths))
        with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:  # Pillow releases the GIL
            files = dict(zip(unique, pool.map(read, unique), strict=True))
            contents = {f[0]: f[1] for f in files.values() if f}
            made = dict(zip(contents, pool.map(_thumbnail, contents.values()), strict=True))
        self.by_hash = {key: thumb[2] for key, thumb in sorted(made.items()) if thumb}
        self.by_path = {p: (f[0], *m[:2]) if f and (m := made[f[0]]) else None for p, f in files.items()}

    def get(self, path: str) -> tuple[str, int, int] | None:
        """(key, width, height) of the thumbnail of `path`, or None when it is missing or unreadable."""
        return self.by_path.get(path)
