"""Writes that other writers, odd output paths and big sources cannot break: every JSONL row in one
`write` (several writers into one pipe or file never interleave), outputs that are FIFOs,
devices or terminals written into and never replaced, merge's open files bounded, and sources
hashed a block at a time whatever their size."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest
from support.commands import BIN, sh

SIZES = (90, 3_000, 5_000, 9_000, 70_000, 130_000)  # around PIPE_BUF, the 8 KiB buffer and beyond


def rollout_rows(prefix: str, count: int) -> list[dict]:
    """Rolled-out rows with replies of many sizes, each ending in its id's box."""
    return [
        {
            "id": f"{prefix}{i}",
            "run": 0,
            "question": "q",
            "type": "T",
            "subtype": "S",
            "ans_type": "blank",
            "choices": [],
            "answer": ["1"],
            "error": None,
            "model": "m",
            "response": "x" * SIZES[i % len(SIZES)] + "\\boxed{1}",
        }
        for i in range(count)
    ]


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def whole_lines(data: bytes, expected: set[str]) -> None:
    """Every line is one whole row, and every expected row is there once."""
    lines = data.split(b"\n")
    assert lines[-1] == b""
    ids = [json.loads(line)["id"] for line in lines[:-1]]  # a torn or interleaved line fails here
    assert sorted(ids) == sorted(expected)


def test_two_writers_into_one_pipe_never_interleave_their_rows(tmp_path):
    a = write_rows(tmp_path / "a.jsonl", rollout_rows("a", 150))
    b = write_rows(tmp_path / "b.jsonl", rollout_rows("b", 150))
    read, write = os.pipe()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    writers = [
        subprocess.Popen(["bv", "judge", "--mode", "rules", "--quiet", str(f)], stdout=write, env=env)
        for f in (a, b)
    ]
    os.close(write)
    chunks = []
    while chunk := os.read(read, 3000):  # a slow reader: the pipe fills, writers wait on it
        chunks.append(chunk)
    os.close(read)
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    whole_lines(b"".join(chunks), {f"{p}{i}" for p in "ab" for i in range(150)})


def test_two_writers_appending_to_one_file_never_tear_a_line(tmp_path):
    a = write_rows(tmp_path / "a.jsonl", rollout_rows("a", 150))
    b = write_rows(tmp_path / "b.jsonl", rollout_rows("b", 150))
    out = tmp_path / "out.jsonl"
    result = sh(
        f"(bv judge --mode rules --quiet {a} >> {out} & bv judge --mode rules --quiet {b} >> {out}; wait)"
    )
    assert result.returncode == 0, result.stderr
    whole_lines(out.read_bytes(), {f"{p}{i}" for p in "ab" for i in range(150)})


def test_two_merges_into_one_pipe_write_whole_lines(tmp_path):
    """bv merge writes many rows a write, but only whole ones."""
    a = write_rows(tmp_path / "a.jsonl", rollout_rows("a", 300))
    b = write_rows(tmp_path / "b.jsonl", rollout_rows("b", 300))
    result = sh(f"(bv merge {a} & bv merge {b}; wait) | cat > {tmp_path / 'out.jsonl'}")
    assert result.returncode == 0, result.stderr
    whole_lines((tmp_path / "out.jsonl").read_bytes(), {f"{p}{i}" for p in "ab" for i in range(300)})


def _drain(path: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(path, "rb") as f:
            into.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    "command",
    [
        "bv merge {rows} -o {out}",
        "bv export {rows} --format csv -o {out}",
        "bv report {rows} --html {out}",
    ],
)
def test_an_output_fifo_is_written_into_not_replaced(tmp_path, command):
    rows = write_rows(tmp_path / "rows.jsonl", [{**r, "hard": 1} for r in rollout_rows("r", 3)])
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _drain(fifo, got)
    result = sh(command.format(rows=rows, out=fifo), timeout=60)
    reader.join(timeout=30)
    assert result.returncode in (0, 1), result.stderr  # report exits 1 for rows without a judge
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO
    assert got and b"r2" in got[0]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []  # no temp file left


def test_an_output_device_is_written_into_not_replaced(tmp_path):
    """A character device like /dev/null, made here (never the real one): bv writes into it."""
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        with open(device, "wb") as f:
            f.write(b"probe")
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a character device here: {exc}")
    rows = write_rows(tmp_path / "rows.jsonl", [{**r, "hard": 1} for r in rollout_rows("r", 3)])
    for command in (f"bv merge {rows} -o {device}", f"bv export {rows} --format csv -o {device}"):
        result = sh(command)
        assert result.returncode == 0, result.stderr
        assert stat.S_ISCHR(os.stat(device).st_mode), command  # still the device
        assert os.stat(device).st_rdev == os.makedev(1, 3)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".null")] == []


def test_an_output_terminal_is_written_into(tmp_path):
    """`-o /dev/pts/N`: the rows appear on that terminal, which stays a terminal."""
    master, slave = os.openpty()
    name = os.ttyname(slave)
    rows = write_rows(tmp_path / "rows.jsonl", [{**r, "hard": 1} for r in rollout_rows("r", 2)])
    got: list[bytes] = []

    def read() -> None:
        while b"r1" not in b"".join(got):
            got.append(os.read(master, 1 << 16))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    result = sh(f"bv export {rows} --format csv -o {name}")
    reader.join(timeout=30)
    still = os.stat(name).st_mode
    os.close(slave)
    os.close(master)
    assert result.returncode == 0, result.stderr
    assert b"r1" in b"".join(got)
    assert stat.S_ISCHR(still)


def test_merge_of_many_shards_needs_few_open_files(tmp_path):
    shards = [write_rows(tmp_path / f"s{k:03}.jsonl", rollout_rows(f"s{k}-", 2)) for k in range(200)]
    out = tmp_path / "all.jsonl"
    result = sh(f"ulimit -n 64 && bv merge {tmp_path}/s*.jsonl -o {out}")
    assert result.returncode == 0, result.stderr
    whole_lines(out.read_bytes(), {f"s{k}-{i}" for k in range(200) for i in range(2)})
    assert len(shards) == 200


def test_a_source_over_the_image_size_limit_is_hashed_and_converted(sample_dir, tmp_path):
    """Sources are hashed a block at a time: a valid zip of 70 MB converts (the image limit is 64 MiB)."""
    source = tmp_path / "big.zip"
    with zipfile.ZipFile(source, "w") as archive:
        archive.write(sample_dir / "meta_data.jsonl", "meta_data.jsonl")
        for image in (sample_dir / "images").iterdir():
            archive.write(image, f"images/{image.name}")
        archive.writestr(zipfile.ZipInfo("padding.bin"), os.urandom(70 * 1024 * 1024))
    result = sh(f"bv data --from {source} --out {tmp_path / 'set'}", timeout=120)
    assert result.returncode == 0, result.stderr
    marker = json.loads((tmp_path / "set" / ".bv-data.json").read_text())
    assert marker["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", ["fifo", "device", "socket"])
def test_a_source_that_is_not_a_regular_file_gets_a_plain_message(tmp_path, kind):
    if kind == "fifo":
        source = tmp_path / "data.zip"
        os.mkfifo(source)
    elif kind == "device":
        source = Path("/dev/zero")  # only read, never written
    else:
        source = tmp_path / "sock.zip"
        import socket

        server = socket.socket(socket.AF_UNIX)
        server.bind(str(source))
    result = sh(f"bv data --from {source} --out {tmp_path / 'set'}", timeout=30)
    assert result.returncode == 1, result.stderr
    assert f"{source}: not a regular file" in result.stderr or f"cannot read {source}" in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "set").exists()
