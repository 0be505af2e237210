"""`bv data`'s sources: the official BabyVision set from the Hugging Face Hub, a parquet file,
or the official repository's zip, each read as rows in the official `meta_data.jsonl` layout.

The Hub's copy is one parquet file (split `train`) with each image embedded as a datasets
`Image` struct {bytes, path}; the zip holds `meta_data.jsonl` and `images/`, perhaps under a
top folder. huggingface_hub and pyarrow are an optional extra (`[data]`), imported only here,
only when needed; the zip needs neither. Everything read is checked before it is trusted: a
parquet whose columns do not fit is refused, zip members are read by name (never extracted by
path), and nothing bigger than an image may be is read.
"""

from __future__ import annotations

import json
import posixpath
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bv.core.errors import BadRecord, Fatal
from bv.core.images import MAX_IMAGE_BYTES
from bv.core.items import BENCHMARK_REPO, answer_text

REPO_ID = BENCHMARK_REPO
OFFICIAL_ZIP = "babyvision_data.zip"
INSTALL_HINT = "pip install 'babyvision-bv[data]' (from a checkout: pip install '.[data]')"
MAX_META_BYTES = 64 * 1024 * 1024

# The official meta_data.jsonl fields, in the order the official file has them; what a parquet
# column may be called instead (the Hub's viewer names the option list `choices` in places).
FIELDS = ("taskId", "question", "image", "ansType", "options", "choiceAns", "blankAns", "type", "subtype")
ALIASES = {"options": ("options", "choices")}
OPTIONAL = ("coT",)


@dataclass
class SourceRow:
    """One item as read: its official record (`image` = the name it had, if any) and image bytes."""

    where: str  # for messages: "parquet row 7", "meta_data.jsonl:7"
    record: dict[str, Any]
    image: bytes
    problem: str | None = None  # why this row cannot be used (the others still can)


def _bad(where: str, exc: BadRecord) -> SourceRow:
    return SourceRow(where, {}, b"", problem=str(exc))


def need(module: str) -> Any:
    """Import an optional dependency of `bv data`, or say exactly what to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise Fatal(f"bv data needs {module.split('.')[0]}, which is not installed: {INSTALL_HINT}") from None


def fetch(repo_id: str = REPO_ID, revision: str | None = None) -> tuple[Path, str]:
    """The train parquet file of a Hub dataset, through huggingface_hub and its cache (HF_TOKEN,
    HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE work as usual); and where it came from, for the record."""
    hub = need("huggingface_hub")
    need("pyarrow")
    try:
        folder = Path(
            hub.snapshot_download(
                repo_id, repo_type="dataset", revision=revision, allow_patterns=["*.parquet", "*/*.parquet"]
            )
        )
    except Exception as exc:  # huggingface_hub's errors: offline, not found, gated, HTTP
        raise Fatal(
            f"cannot fetch {repo_id} from the Hugging Face Hub: {_hub_message(exc)}; a copy you already"
            f" have converts offline: give `source` FILE (the parquet file or {OFFICIAL_ZIP})"
        ) from None
    files = sorted(folder.rglob("*.parquet"))
    train = [p for p in files if "train" in p.relative_to(folder).as_posix()]
    chosen = train if train else files
    if len(chosen) != 1:
        listed = ", ".join(p.relative_to(folder).as_posix() for p in files) or "none"
        raise Fatal(f"{repo_id}: expected one train parquet file, found {len(chosen)} (files: {listed})")
    return chosen[0], f"hf://datasets/{repo_id}@{folder.name}"


def _hub_message(exc: Exception) -> str:
    text = " ".join(str(exc).split())[:400]
    name = type(exc).__name__
    if "offline" in text.lower() or name in ("LocalEntryNotFoundError", "OfflineModeIsEnabled"):
        text += " (HF_HUB_OFFLINE is set, or the Hub could not be reached, and the cache lacks it)"
    return f"{name}: {text}"


def is_official(source: Path | None, origin: str) -> bool:
    """Whether a set claims to be the official one: fetched from the official repository, or a
    file under the official name (or from the Hub cache of the official dataset)."""
    if source is None:
        return origin.startswith(f"hf://datasets/{REPO_ID}@")
    return source.name == OFFICIAL_ZIP or "datasets--UnipatAI--BabyVision" in str(source)


def _open_source(path: Path) -> Any:
    """A source file opened for reading: a regular file only, checked on the open file (opened
    without blocking, so a FIFO or a device is refused at once, not waited on or read forever)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Fatal(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Fatal(f"{path}: not a regular file (a FIFO or a device cannot be a data set: give the file)")
    return os.fdopen(fd, "rb")


SOURCE_BLOCK = 1 << 20  # a source is hashed and sniffed a block at a time, whatever its size


def source_sha256(path: Path) -> str:
    """The SHA-256 of a source file, read a block at a time (a 2 GB parquet costs one block)."""
    import hashlib

    digest = hashlib.sha256()
    try:
        with _open_source(path) as f:
            while block := f.read(SOURCE_BLOCK):
                digest.update(block)
    except OSError as exc:
        raise Fatal(f"cannot read {path}: {exc.strerror or exc}") from None
    return digest.hexdigest()


def read_source(path: Path) -> Iterator[SourceRow]:
    """Rows of a parquet file or a zip, told apart by their first bytes."""
    try:
        with _open_source(path) as f:
            head = f.read(4)
    except OSError as exc:
        raise Fatal(f"cannot read {path}: {exc.strerror or exc}") from None
    if head == b"PAR1":
        return parquet_rows(path)
    if head.startswith(b"PK"):
        return zip_rows(path)
    raise Fatal(f"{path}: neither a parquet file nor a zip (the official babyvision_data.zip)")


def _column_map(names: list[str]) -> dict[str, str]:
    """Official field -> parquet column; Fatal when the columns do not fit the layout."""
    mapping, missing = {}, []
    for name in FIELDS:
        found = next((c for c in ALIASES.get(name, (name,)) if c in names), None)
        if found is None:
            missing.append(" or ".join(ALIASES.get(name, (name,))))
        else:
            mapping[name] = found
    if missing:
        raise Fatal(
            f"the parquet columns do not fit the BabyVision layout: missing {', '.join(missing)}"
            f" (it has {', '.join(names)})"
        )
    for name in OPTIONAL:
        if name in names:
            mapping[name] = name
    return mapping


# A row group whose image column holds more than this is read a row at a time, each cell's size
# checked before the cell becomes a Python object.
MAX_BATCH_IMAGE_BYTES = MAX_IMAGE_BYTES


def parquet_rows(path: Path) -> Iterator[SourceRow]:
    """Rows of a parquet file in the dataset's schema, read in small batches (bounded memory).
    Each image cell's size is read before the cell itself: one over the image size limit costs
    its row, unread (alone in its row group, it is refused from the file's metadata); a row
    group pyarrow cannot read costs its rows, and the other rows still come."""
    pq = need("pyarrow.parquet")
    try:
        table = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's ArrowInvalid and friends
        raise Fatal(f"{path}: not a readable parquet file ({exc})") from None
    mapping = _column_map(table.schema_arrow.names)
    columns = list(dict.fromkeys(mapping.values()))
    number = 0
    for group in range(table.num_row_groups):
        rows = table.metadata.row_group(group).num_rows
        image_bytes = _image_chunk_bytes(table, group, mapping["image"])
        if rows == 1 and image_bytes > MAX_IMAGE_BYTES:
            number += 1
            yield SourceRow(f"{path.name}: row {number}", {}, b"", problem=_too_big(image_bytes))
            continue
        batch_size = 32 if image_bytes <= MAX_BATCH_IMAGE_BYTES else 1
        done = 0
        try:
            for batch in table.iter_batches(batch_size=batch_size, row_groups=[group], columns=columns):
                for row in _batch_rows(batch, mapping):
                    number, done = number + 1, done + 1
                    yield _parquet_row(f"{path.name}: row {number}", row, mapping)
        except Exception as exc:  # pyarrow: a corrupt page, a bad compression, a truncated file
            why = f"row group {group + 1} cannot be read ({type(exc).__name__}: {exc})"
            for _ in range(rows - done):
                number += 1
                yield SourceRow(f"{path.name}: row {number}", {}, b"", problem=why)


def _image_chunk_bytes(table: Any, group: int, column: str) -> int:
    """The uncompressed size of the image column (all its leaves) in one row group, from the
    file's metadata."""
    meta = table.metadata.row_group(group)
    leaves = (meta.column(i) for i in range(meta.num_columns))
    return sum(
        c.total_uncompressed_size
        for c in leaves
        if c.path_in_schema == column or c.path_in_schema.startswith(column + ".")
    )


def _too_big(size: int) -> str:
    return f"the image is {size} bytes, over the image size limit of {MAX_IMAGE_BYTES} (not read)"


def _batch_rows(batch: Any, mapping: dict[str, str]) -> Iterator[dict[str, Any]]:
    """A batch's rows as dicts, each image cell's size checked before it is converted: a cell
    over the limit is given as its size (an int), never as its bytes."""
    import pyarrow.compute as pc

    names = batch.schema.names
    image = batch.column(names.index(mapping["image"]))
    is_struct = hasattr(image.type, "get_field_index") and image.type.get_field_index("bytes") >= 0
    data = image.field("bytes") if is_struct else image
    sizes = pc.binary_length(data).to_pylist() if _is_binary(data.type) else [None] * len(batch)
    others = batch.select([n for n in names if n != mapping["image"]]).to_pylist()
    for j, row in enumerate(others):
        size = sizes[j]
        row[mapping["image"]] = size if size is not None and size > MAX_IMAGE_BYTES else image[j].as_py()
        yield row


def _is_binary(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


def _parquet_row(where: str, row: dict[str, Any], mapping: dict[str, str]) -> SourceRow:
    record = {name: row.get(column) for name, column in mapping.items()}
    try:
        image, record["image"] = _image_value(record.get("image"))
        return SourceRow(where, normalise(record), image)
    except BadRecord as exc:
        return _bad(where, exc)


def _image_value(value: Any) -> tuple[bytes, str | None]:
    """The bytes and original name of a datasets Image value ({bytes, path}, or bare bytes); an
    int is the size of a cell too big to have been read (`_batch_rows`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        raise BadRecord(_too_big(value))
    if isinstance(value, (bytes, bytearray)):
        return bytes(value), None
    if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)) and value["bytes"]:
        name = value.get("path")
        return bytes(value["bytes"]), name if isinstance(name, str) else None
    if isinstance(value, dict) and isinstance(value.get("path"), str) and value["path"]:
        raise BadRecord(
            "the image is not embedded: the 'image' column holds a file path, not the image's bytes;"
            " bv data reads parquet files with their images embedded (docs/data.md)"
        )
    raise BadRecord("the image is not embedded (no bytes in the 'image' column; docs/data.md)")


def normalise(record: dict[str, Any]) -> dict[str, Any]:
    """Tolerate the ways a dataset may store the official fields; the order of the official file."""
    options = record.get("options")
    if isinstance(options, str):
        try:
            options = json.loads(options) if options.strip() else []
        except ValueError:
            raise BadRecord("'options' is neither a list nor a JSON list") from None
    record["options"] = [str(o) for o in options] if isinstance(options, (list, tuple)) else []
    answer = record.get("choiceAns")
    if isinstance(answer, float) and answer.is_integer():
        answer = int(answer)
    if isinstance(answer, str) and answer.strip().isdecimal():
        answer = int(answer.strip())
    elif isinstance(answer, str) and len(answer.strip()) == 1 and answer.strip().isalpha():
        answer = ord(answer.strip().upper()) - ord("A")  # a label, as some copies store it
    record["choiceAns"] = answer
    blank = record.get("blankAns")
    if isinstance(blank, (int, float)) and not isinstance(blank, bool):
        record["blankAns"] = answer_text(blank)  # NaN (a missing cell) is no answer, not "nan"
    task = record.get("taskId")
    if isinstance(task, float) and task.is_integer():
        record["taskId"] = int(task)
    ordered = {name: record.get(name) for name in FIELDS}
    ordered.update({name: record[name] for name in OPTIONAL if record.get(name) is not None})
    return ordered


def _zip_root(archive: zipfile.ZipFile) -> str:
    """The folder of the zip's meta_data.jsonl (the shallowest one; macOS resource forks ignored)."""
    metas = [
        info.filename
        for info in archive.infolist()
        if posixpath.basename(info.filename) == "meta_data.jsonl" and "__MACOSX" not in info.filename
    ]
    if not metas:
        raise Fatal(f"{archive.filename}: no meta_data.jsonl in the zip (is it the official {OFFICIAL_ZIP}?)")
    return posixpath.dirname(min(metas, key=lambda name: (name.count("/"), name)))


def _member(archive: zipfile.ZipFile, name: str, limit: int, counts: Counter[str]) -> bytes:
    """A zip member's bytes, read no further than `limit` (a zip bomb stops there); BadRecord for
    whatever keeps them from being read whole and right: a name the zip holds twice (which one
    is meant?), encryption, a compression method Python lacks, a bad CRC, broken data."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise BadRecord(f"{name} is not in the zip") from None
    if counts[name] > 1:
        raise BadRecord(f"{name} is in the zip {counts[name]} times; which one is meant is unclear")
    if info.file_size > limit:
        raise BadRecord(f"{name}: {info.file_size} bytes is more than the {limit} allowed")
    if info.flag_bits & 0x1:
        raise BadRecord(f"{name}: encrypted (bv data reads no passwords)")
    try:
        with archive.open(info) as stream:
            data = stream.read(limit + 1)
    except (NotImplementedError, zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError) as exc:
        # a compression method Python lacks, a bad CRC, broken deflate data, a member cut short
        raise BadRecord(f"{name}: cannot be read from the zip ({exc})") from None
    if len(data) > limit:
        raise BadRecord(f"{name}: more than the {limit} bytes allowed")
    return data


def zip_rows(path: Path) -> Iterator[SourceRow]:
    """Rows of the official zip: each meta_data.jsonl line and the image it names, read by name
    from inside the zip's root folder (a path that leaves it is refused). A member that cannot be
    read costs its row; an unreadable meta_data.jsonl, the set."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise Fatal(f"{path}: not a readable zip ({exc})") from None
    with archive:
        counts = Counter(info.filename for info in archive.infolist())
        root = _zip_root(archive)
        meta_name = posixpath.join(root, "meta_data.jsonl")
        try:
            lines = _member(archive, meta_name, MAX_META_BYTES, counts).decode("utf-8-sig").splitlines()
        except (BadRecord, UnicodeDecodeError) as exc:
            raise Fatal(f"{path}: {meta_name} cannot be read: {exc}") from None
        for number, line in enumerate(lines, 1):
            if line.strip():
                where = f"{meta_name}:{number}"
                try:
                    record, image = _zip_item(archive, root, line, counts)
                    yield SourceRow(where, record, image)
                except BadRecord as exc:
                    yield _bad(where, exc)


def _zip_item(
    archive: zipfile.ZipFile, root: str, line: str, counts: Counter[str]
) -> tuple[dict[str, Any], bytes]:
    """One meta_data.jsonl line and the bytes of the image it names."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise BadRecord(f"invalid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise BadRecord("expected a JSON object")
    image = record.get("image")
    if not isinstance(image, str) or not image:
        raise BadRecord("no 'image' path")
    member = posixpath.normpath(posixpath.join(root, image))
    inside = member.startswith(root + "/") if root else not member.startswith("../")
    if not inside or image.startswith("/") or member in ("..", "."):
        raise BadRecord(f"image {image!r} is not in the zip under {root or 'its top'}/")
    return normalise(record), _member(archive, member, MAX_IMAGE_BYTES, counts)
