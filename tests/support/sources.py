"""`bv data`'s sources made from a sample set: a parquet file in the Hub dataset's schema, a zip in
the official layout."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from support.commands import read_items


def write_parquet(path: Path, records: list[dict], images: list[bytes], drop: tuple[str, ...] = ()) -> Path:
    """A parquet file as the Hub's dataset has it: the official fields, the image embedded."""
    columns = {
        "taskId": pa.array([r["taskId"] for r in records], pa.int64()),
        "question": pa.array([r["question"] for r in records], pa.string()),
        "image": pa.array(
            [{"bytes": data, "path": Path(r["image"]).name} for r, data in zip(records, images, strict=True)],
            IMAGE,
        ),
        "ansType": pa.array([r["ansType"] for r in records], pa.string()),
        "choices": pa.array([r["options"] for r in records], pa.list_(pa.string())),
        "choiceAns": pa.array([r["choiceAns"] for r in records], pa.int64()),
        "blankAns": pa.array([r["blankAns"] for r in records], pa.string()),
        "type": pa.array([r["type"] for r in records], pa.string()),
        "subtype": pa.array([r["subtype"] for r in records], pa.string()),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({k: v for k, v in columns.items() if k not in drop}), path)
    return path


def sample_parquet(sample_dir: Path, path: Path) -> Path:
    records = read_items(sample_dir)
    return write_parquet(path, records, [(sample_dir / r["image"]).read_bytes() for r in records])


def zip_of(
    folder: Path, path: Path, top: str = "babyvision_data", extra: dict[str, bytes] | None = None
) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, f"{top}/{file.relative_to(folder)}")
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return path


IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
