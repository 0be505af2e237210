"""Writing a BabyVision set (`bv data`): the official layout, checked, atomic, idempotent.

Rows from any source (bv.data.sources) are written as `meta_data.jsonl` + `images/` into a temporary
folder beside the target. Each row is parsed the way `bv prompt` will read it and its image
decoded in full before it is written; the folder is then read back and counted. Only then does
it take the target's place (bv.core.atomic.swap_in: in one step where the system can), so an
interrupted run leaves the old set or the new one, never half of one, and what a run killed
outright left is cleaned (or put back) by the next. When the result is byte for byte the set
already there, nothing changes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bv.core import environment
from bv.core.atomic import staging_folder, swap_in
from bv.core.errors import BadRecord, Fatal
from bv.core.images import MAX_IMAGE_PIXELS, sniff_format
from bv.core.items import id_text
from bv.core.stats import counted

# The figures the BabyVision paper and repository publish for the official set.
PUBLISHED: dict[str, Any] = {
    "items": 388,
    "ans_type": {"blank": 253, "choice": 135},
    "type": {
        "Fine-grained Discrimination": 163,
        "Spatial Perception": 91,
        "Visual Pattern Recognition": 51,
        "Visual Tracking": 83,
    },
    "subtypes": 22,
}
MARKER = ".bv-data.json"  # provenance; also how bv data knows a folder is its own to replace
EXTENSIONS = {"PNG": "png", "JPEG": "jpg", "WEBP": "webp", "GIF": "gif", "BMP": "bmp", "TIFF": "tiff"}
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")


def default_dir() -> Path:
    """$XDG_DATA_HOME/bv/babyvision (~/.local/share/bv/babyvision when it is not set)."""
    return environment.data_home() / "bv" / "babyvision"


@dataclass
class SetSummary:
    """What a written set holds, as printed and compared with the published figures."""

    items: int = 0
    ans_type: Counter = field(default_factory=Counter)
    type: Counter = field(default_factory=Counter)
    subtype: Counter = field(default_factory=Counter)
    smallest: tuple[int, int] | None = None
    largest: tuple[int, int] | None = None
    image_bytes: int = 0

    def add_size(self, size: tuple[int, int]) -> None:
        area = size[0] * size[1]
        if self.smallest is None or area < self.smallest[0] * self.smallest[1]:
            self.smallest = size
        if self.largest is None or area > self.largest[0] * self.largest[1]:
            self.largest = size

    def lines(self) -> list[str]:
        answers = ", ".join(f"{self.ans_type[name]} {name}" for name in ("choice", "blank"))
        sizes = (
            f"; images from {self.smallest[0]}×{self.smallest[1]} to {self.largest[0]}×{self.largest[1]}"
            if self.smallest and self.largest
            else ""
        )
        megabytes = f"{self.image_bytes / 1e6:.1f} MB"
        out = [f"{self.items} items ({answers}), {len(self.subtype)} subtypes{sizes}, {megabytes}"]
        width = max((len(name) for name in self.type), default=0)
        out += [f"  {name:<{width}}  {n:>4}" for name, n in sorted(self.type.items())]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "ans_type": dict(sorted(self.ans_type.items())),
            "type": dict(sorted(self.type.items())),
            "subtypes": len(self.subtype),
        }


def differences(summary: SetSummary) -> list[str]:
    """How a set differs from the published figures of the official one (empty: it matches)."""
    ours = summary.to_json()
    pairs = [
        ("items", ours["items"], PUBLISHED["items"]),
        ("subtypes", ours["subtypes"], PUBLISHED["subtypes"]),
    ]
    for group in ("ans_type", "type"):
        for name in sorted(set(ours[group]) | set(PUBLISHED[group])):
            pairs.append((name, ours[group].get(name, 0), PUBLISHED[group].get(name, 0)))
    return [f"{name}: {n} (published: {published})" for name, n, published in pairs if n != published]


def decode_size(data: bytes) -> tuple[int, int]:
    """Decode an image in full (what `bv data` promises of every image); its size, or BadRecord."""
    from bv.core.images import pillow

    fmt = sniff_format(data[:16])
    if fmt is None:
        raise BadRecord("the image is not a PNG, JPEG, WebP, GIF, BMP or TIFF")
    Image, _ = pillow()
    try:
        with Image.open(io.BytesIO(data), formats=[fmt]) as img:
            if img.width * img.height > MAX_IMAGE_PIXELS:
                raise BadRecord(f"the image has {img.width}x{img.height} pixels, over the limit")
            img.load()
            return img.size
    except (OSError, SyntaxError, ValueError) as exc:
        raise BadRecord(f"the image cannot be decoded ({exc})") from None


def _image_name(item_id: str, original: str | None, fmt: str, used: set[str]) -> str:
    """The image's file name under images/: the name it had when that is plain and still free,
    else one made from the item id."""
    name = (original or "").replace("\\", "/").rsplit("/", 1)[-1]
    if not _SAFE_NAME.fullmatch(name) or name.lower() in used:
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", item_id)[:80] or "item"
        name, k = f"{stem}.{EXTENSIONS[fmt]}", 2
        while name.lower() in used:
            name, k = f"{stem}-{k}.{EXTENSIONS[fmt]}", k + 1
    used.add(name.lower())
    return name


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def stage(
    rows: Iterable[Any], folder: Path, problems: list[tuple[str, str]]
) -> tuple[SetSummary, dict[str, str]]:
    """Write the usable rows into `folder`; each unusable one costs only itself, named in
    `problems`. Returns the sizes seen and the sha256 of every file written (by relative path)."""
    from bv.core.items import parse_item

    (folder / "images").mkdir()
    used: set[str] = set()
    summary, hashes, ids, lines = SetSummary(), {}, set(), []
    for row in rows:
        if row.problem:
            problems.append((row.where, row.problem))
            continue
        try:
            size = decode_size(row.image)
            item_id = id_text(row.record.get("taskId"))
            if item_id in ids:
                raise BadRecord(f"a second item with taskId {item_id}")
            fmt = sniff_format(row.image[:16])
            if fmt is None:
                raise BadRecord("not an image bv knows")
            record = {
                **row.record,
                "image": f"images/{_image_name(item_id, row.record.get('image'), fmt, used)}",
            }
            parse_item(record)  # as bv prompt will read it
        except BadRecord as exc:
            problems.append((row.where, str(exc)))
            continue
        ids.add(item_id)
        _write_file(folder / record["image"], row.image)
        hashes[record["image"]] = hashlib.sha256(row.image).hexdigest()
        summary.add_size(size)
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    meta = "".join(lines).encode("utf-8")
    _write_file(folder / "meta_data.jsonl", meta)
    hashes["meta_data.jsonl"] = hashlib.sha256(meta).hexdigest()
    return summary, hashes


def check(folder: Path, hashes: dict[str, str], summary: SetSummary) -> SetSummary:
    """Read the written set back as bv prompt will (every line an item, every image where it
    says, the very bytes that were decoded) and count it."""
    from bv.core.images import resolve_image
    from bv.core.items import parse_item
    from bv.core.jsonl import Problems, read_records

    said = io.StringIO()
    problems = Problems(stream=said)
    for _, item in read_records([str(folder / "meta_data.jsonl")], problems, parse_item):
        for image in item["images"]:
            path = resolve_image(image, folder)
            if hashlib.sha256(path.read_bytes()).hexdigest() != hashes.get(image):
                raise Fatal(f"{image} does not hold what was written")
            summary.image_bytes += path.stat().st_size
        summary.items += 1
        summary.ans_type[item["ans_type"]] += 1
        summary.type[item["type"]] += 1
        summary.subtype[item["subtype"]] += 1
    if problems.count:
        raise Fatal(f"the written meta_data.jsonl does not read back: {said.getvalue().strip()}")
    return summary


def folder_digest(folder: Path) -> str | None:
    """One hash of a set's meta_data.jsonl and images/ (names and bytes), or None if it has none."""
    meta = folder / "meta_data.jsonl"
    if not meta.is_file():
        return None
    hashes = {"meta_data.jsonl": hashlib.sha256(meta.read_bytes()).hexdigest()}
    for path in sorted((folder / "images").glob("*")) if (folder / "images").is_dir() else []:
        hashes[f"images/{path.name}"] = (
            hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "?"
        )
    return _digest(hashes)


def _digest(hashes: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(hashes.items())).encode()).hexdigest()


def install(staged: Path, out: Path) -> bool:
    """Put the staged set in `out`'s place by rename; False when `out` already is that set."""
    if out.exists() and not out.is_dir():
        raise Fatal(f"{out} exists and is not a folder")
    if out.exists() and folder_digest(out) == folder_digest(staged):
        return False
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise Fatal(
            f"{out} is not empty and was not written by bv data: choose another `out`, or empty it first"
        )
    swap_in(staged, out)  # the old set, if any, is now in `staged`, which write_set removes
    return True


def said_once(problems: list[tuple[str, str]]) -> list[str]:
    """One line per cause: `where: why`, or `N rows (first, second, third, …): why`."""
    wheres: dict[str, list[str]] = {}
    for where, why in problems:
        wheres.setdefault(why, []).append(where)
    lines = []
    for why, places in wheres.items():
        if len(places) == 1:
            lines.append(f"{places[0]}: {why}")
        else:
            shown = ", ".join(places[:3]) + (", …" if len(places) > 3 else "")
            lines.append(f"{len(places)} rows ({shown}): {why}")
    return lines


def write_set(
    rows: Iterable[Any], out: Path, provenance: dict[str, Any], skip_bad: bool
) -> tuple[SetSummary, bool]:
    """Write the rows as a set in `out`; (what it holds, whether `out` changed). Unusable rows are
    said on stderr; unless `skip_bad`, any of them means nothing is written (Fatal)."""
    import click

    out = out.expanduser().absolute()
    staged = staging_folder(out)
    try:  # Ctrl-C and SIGTERM (bv.cli.ending.install_sigterm) unwind through the finally below
        problems: list[tuple[str, str]] = []
        summary, hashes = stage(rows, staged, problems)
        for line in said_once(problems):
            click.echo(f"bv data: {line}", err=True)
        if problems and not skip_bad:
            unusable = counted(len(problems), "unusable item")
            raise Fatal(f"{unusable}; nothing written (`skip_bad` writes the rest)")
        if len(hashes) == 1:  # meta_data.jsonl alone
            raise Fatal("no usable item; nothing written")
        check(staged, hashes, summary)
        marker = {**provenance, **summary.to_json(), "skipped": len(problems), "digest": _digest(hashes)}
        (staged / MARKER).write_text(json.dumps(marker, indent=2, ensure_ascii=False) + "\n")
        changed = install(staged, out)
    except OSError as exc:
        raise Fatal(f"cannot write the set in {out}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return summary, changed
