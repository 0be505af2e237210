"""A reader of a W&B run file (run-ID.wandb), to read back what an offline run holds: the file is
a LevelDB-style log (a 7-byte `:W&B` header, 32 KiB blocks, each record cut into checksummed
chunks) of W&B's own protobuf records (wandb.proto.wandb_internal_pb2.Record). wandb 0.19+ writes
it from its Go core and no longer ships a Python reader, so the test reads it from the format."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = 7  # checksum (uint32), length (uint16), type (uint8)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def chunks(data: bytes) -> list[bytes]:
    """The records' bytes, their chunks joined and each chunk's CRC-32 checked."""
    assert data[:4] == b":W&B", "not a W&B run file"
    records, pending, at = [], b"", 7
    while at + HEADER <= len(data):
        left = BLOCK - at % BLOCK
        if left < HEADER:  # the block's tail is padding
            at += left
            continue
        checksum, length, kind = struct.unpack("<IHB", data[at : at + HEADER])
        body = data[at + HEADER : at + HEADER + length]
        if kind == 0 and length == 0:
            at += left
            continue
        assert zlib.crc32(bytes([kind]) + body) & 0xFFFFFFFF == checksum, f"bad checksum at {at}"
        at += HEADER + length
        if kind == FULL:
            records.append(body)
        elif kind == FIRST:
            pending = body
        elif kind == MIDDLE:
            pending += body
        elif kind == LAST:
            records.append(pending + body)
    return records


def read_run(path: Path) -> dict[str, Any]:
    """What the run holds: its id, config, history rows (by step), summary, artifacts, exit code."""
    from wandb.proto import wandb_internal_pb2 as pb

    out: dict[str, Any] = {"config": {}, "history": [], "summary": {}, "artifacts": [], "exit": None}
    for data in chunks(path.read_bytes()):
        record = pb.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["id"] = record.run.run_id
            out["config"].update({i.key: json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            out["config"].update({i.key: json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
            out["history"].append(row)
        elif kind == "summary":
            out["summary"].update(
                {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.summary.update}
            )
        elif kind == "artifact":
            names = [entry.path for entry in record.artifact.manifest.contents]
            out["artifacts"].append(
                {"name": record.artifact.name, "type": record.artifact.type, "files": names}
            )
        elif kind == "exit":
            out["exit"] = record.exit.exit_code
    return out
