"""bv export's official files from a sorted spool on disk: the bytes json.dumps writes for the
rows sorted in memory, whatever the chunking; memory that does not grow with the rows; the
temporary files under TMPDIR, always removed; the duplicate check in a few bits a row."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.commands import BIN, sh

from bv.core.errors import Fatal
from bv.core.jsonl import Problems
from bv.core.records import natural_key
from bv.reporting import sorted_spool
from bv.reporting.export import Export, exported_rows, official_result, write_official
from bv.reporting.sorted_spool import natural_bytes

IDS = ["10", "2", "0445", "445", "a\x00b", "a", "", "é", "a10b", "a9b", "x" * 50, "1.0", "-3", "\u2028"]


def row(item: str, run: int, n: int) -> dict:
    return {
        "id": item,
        "run": run,
        "hard": (None, 0, 1)[n % 3],
        "question": f"question {n} ☃",
        "answer": ["A"],
        "response": f"reply {n}\n\\boxed{{A}}",
        "extracted": "A",
        "type": "t",
        "subtype": f"s{n % 4}",
        "turns": [{"reasoning": f"thought {n}"}],
    }


def expected_files(rows: list[dict]) -> dict[str, bytes]:
    """The official files as the old export wrote them: each run's rows sorted by natural id in
    memory, the array as json.dumps writes it."""
    runs: dict[int, list[dict]] = {}
    for r in rows:
        runs.setdefault(r["run"], []).append(r)
    return {
        f"model_results_run_{run + 1}.json": json.dumps(
            [official_result(r) for r in sorted(members, key=lambda r: natural_key(r["id"]))],
            indent=2,
            ensure_ascii=False,
        ).encode()
        for run, members in runs.items()
    }


@pytest.mark.parametrize("chunk,fan_in", [(1 << 15, 32), (7, 3), (1, 2)])
def test_files_are_the_bytes_of_an_in_memory_sort(tmp_path, monkeypatch, chunk, fan_in):
    """One chunk, many chunks merged in several passes, a chunk a row: the same bytes."""
    monkeypatch.setattr(sorted_spool, "CHUNK_ENTRIES", chunk)
    monkeypatch.setattr(sorted_spool, "FAN_IN", fan_in)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    rows = [row(item, run, n) for n, (run, item) in enumerate((r, i) for i in IDS for r in (3, 0, 1))]
    rows.sort(key=lambda r: hash((r["id"], r["run"])))  # any input order
    counts = write_official(iter(rows), tmp_path / "out")
    assert [(p.name, c) for p, c in counts] == [(f"model_results_run_{k}.json", len(IDS)) for k in (1, 2, 4)]
    written = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    assert written == expected_files(rows)
    assert list((tmp_path / "tmp").iterdir()) == []  # the spool's folder went


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("0019a\x00é\U0001f600-."), max_size=8), max_size=12))
def test_natural_bytes_orders_as_natural_key(texts):
    assert sorted(texts, key=natural_bytes) == sorted(texts, key=natural_key)
    assert len({natural_bytes(t) for t in texts}) == len(set(texts))
    for a in texts:  # no key a prefix of another: entries with a place after them sort as keys
        for b in texts:
            assert a == b or not natural_bytes(b).startswith(natural_bytes(a))


def _peak(rows: int, tmp: Path) -> int:
    """tracemalloc's peak for exporting `rows` judged rows (400 ids, runs 0, 1, …) through the
    duplicate check into official files."""
    records = ((f"in:{n}", row(str(n % 400), n // 400, n)) for n in range(rows))
    tracemalloc.start()
    try:
        write_official(exported_rows(records, Problems(), Export()), tmp / f"out-{rows}")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_rows(tmp_path, monkeypatch):
    """Ten times the rows, about the same peak: the old export's places, keys and lists grew by
    ~300 bytes a row (6 MB more here). Chunks of 500 entries and 4 runs merged at a time (their
    read buffers, 64 kB each, are the spool's one other cost), so both sizes reach both bounds."""
    monkeypatch.setattr(sorted_spool, "CHUNK_ENTRIES", 500)
    monkeypatch.setattr(sorted_spool, "FAN_IN", 4)
    small, large = _peak(2_000, tmp_path), _peak(20_000, tmp_path)
    assert large - small < 600_000, (small, large)


def test_a_full_disk_in_tmpdir_is_one_message_and_nothing_left(tmp_path, monkeypatch):
    """A write to the spool that fails (ENOSPC) is a Fatal naming the temporary folder; the
    spool's folder and the staging folder go, the old output stays."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    real = sorted_spool.SortedSpool._spill

    def full(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sorted_spool, "CHUNK_ENTRIES", 3)
    monkeypatch.setattr(sorted_spool.SortedSpool, "_spill", full)
    with pytest.raises(Fatal, match=r"cannot write temporary files in .*bv-export-.*No space left"):
        write_official(iter([row("1", 0, n) for n in range(5)]), tmp_path / "out")
    monkeypatch.setattr(sorted_spool.SortedSpool, "_spill", real)
    assert list((tmp_path / "tmp").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def test_the_cli_honours_tmpdir_and_keeps_its_messages(tmp_path):
    """Through the command: duplicates still named with file and line, undecided and unjudged
    rows counted with the first ten named, TMPDIR used and left empty."""
    rows = [row(str(n % 15), n // 15, n) for n in range(60)]
    for r in rows:
        r["undecided"] = r["hard"] == 0
    rows.insert(20, dict(rows[3]))  # a second row for (3, 0): line 21
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "tmp").mkdir()
    result = sh(f"TMPDIR={tmp_path / 'tmp'} bv export {source} --format official --out {tmp_path / 'out'}")
    assert result.returncode == 1, result.stderr
    assert f"{source}:21: a second row for id 3 run 0" in result.stderr
    assert "20 rows without a verdict (judge errors) written as false: 0#0, 3#0, 6#0," in result.stderr
    assert "and 10 more; re-run bv judge" in result.stderr
    assert "20 undecided rows (no LLM judge decided them)" in result.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
    assert len(list((tmp_path / "out").iterdir())) == 4


@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_export_leaves_no_temporary_file(tmp_path, signum, status):
    """SIGTERM or Ctrl-C while rows are still coming in: the command stops with its status, the
    spool's folder under TMPDIR and the staging folder go, and no output folder appears."""
    (tmp_path / "tmp").mkdir()
    process = subprocess.Popen(
        [str(BIN / "bv"), "export", "-", "--format", "official", "--out", str(tmp_path / "out")],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp")},
    )
    assert process.stdin is not None
    process.stdin.write("".join(json.dumps(row(str(n), 0, n)) + "\n" for n in range(50)).encode())
    process.stdin.flush()
    deadline = time.monotonic() + 60
    while not list((tmp_path / "tmp").glob("bv-export-*/data")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list((tmp_path / "tmp").glob("bv-export-*/data")), "the spool never started"
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == status, err
    assert b"Traceback" not in err
    assert list((tmp_path / "tmp").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]
