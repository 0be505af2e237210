"""bv merge's functions in process: which row wins, in which order, and which bytes are written.

Merge keeps only where each winning row is (file, byte offset) and copies those lines out, so
these tests check the lines written byte for byte against a plain last-one-wins dictionary.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from bv.core.errors import Fatal
from bv.core.jsonl import Problems, read_records
from bv.core.records import check_row
from bv.stages.merge import merge_rows, ordered_keys, write_rows


def merged(paths: list[str], stdin: bytes | None = None, sort: bool = False, monkeypatch=None):
    """What `bv merge PATHS [--sort]` writes, and the merge's result and problems."""
    problems = Problems(stream=io.StringIO())
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    result = merge_rows(read_records(paths, problems, check_row))
    keys = ordered_keys(result, sort)
    out = io.BytesIO()
    monkeypatch.setattr("sys.stdout", io.TextIOWrapper(out))
    write_rows(result, keys, None)
    return out.getvalue(), result, problems


def test_random_shards_give_the_last_row_of_each_id_and_run(tmp_path, monkeypatch):
    """Rows spread over shards with repeats: the output is exactly the last line written for each
    (id, run), its bytes as they were (spacing, key order), in the order those rows came."""
    rng = random.Random(4)
    expected: dict[tuple[str, int], bytes] = {}
    paths = []
    for shard in range(5):
        lines = []
        for n in range(rng.randint(0, 60)):
            key = (f"item{rng.randint(1, 40)}", rng.randint(0, 2))
            row = {"run": key[1], "shard": shard, "n": n, "id": key[0]}  # not bv's key order
            line = json.dumps(row, indent=None, separators=(", ", ": ")).encode() + b"\n"
            expected.pop(key, None)
            expected[key] = line
            lines.append(line)
        path = tmp_path / f"s{shard}.jsonl"
        path.write_bytes(b"".join(lines))
        paths.append(str(path))
    out, result, problems = merged(paths, monkeypatch=monkeypatch)
    assert out == b"".join(expected.values())
    assert len(result) == len(expected) and problems.count == 0
    assert result.rows_in == sum(len(Path(p).read_bytes().splitlines()) for p in paths)
    assert result.replaced == result.rows_in - len(expected)
    assert result.rows == {}  # rows from files are copied from their files, not held


def test_sort_is_natural_then_by_run(tmp_path, monkeypatch):
    ids = ["item10", "item2", "item1²", "b", "item2", "a10", "a9"]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"id": i, "run": r}) + "\n" for r, i in enumerate(ids)))
    out, _, _ = merged([str(path)], sort=True, monkeypatch=monkeypatch)
    keys = [(r["id"], r["run"]) for r in map(json.loads, out.splitlines())]
    assert keys == [("a9", 6), ("a10", 5), ("b", 3), ("item1²", 2), ("item2", 1), ("item2", 4), ("item10", 0)]


def test_stdin_rows_and_file_rows_replace_each_other(tmp_path, monkeypatch):
    first = tmp_path / "first.jsonl"
    first.write_text('{"id": "1", "run": 0, "v": "file"}\n{"id": "2", "run": 0, "v": "file"}\n')
    last = tmp_path / "last.jsonl"
    last.write_text('{"id": "2", "run": 0, "v": "last"}\n')
    stdin = (
        b'{"id":"1","run":0,"v":"stdin"}\n{"id":"2","run":0,"v":"stdin"}\n{"id":"3","run":0,"v":"\\u00e9"}\n'
    )
    out, result, _ = merged([str(first), "-", str(last)], stdin=stdin, monkeypatch=monkeypatch)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["id"], r["v"]) for r in rows] == [("1", "stdin"), ("3", "é"), ("2", "last")]
    assert set(result.rows) == {("1", 0), ("3", 0)}  # only rows from stdin are held, and only winners
    assert out.splitlines()[1] == '{"id":"3","run":0,"v":"é"}'.encode()  # bv's compact UTF-8 lines


def test_crlf_bom_and_lone_surrogates_are_written_as_clean_lines(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "1", "run": 0}\r\n{"id": "2", "run": 0, "q": "a\\ud800b"}\r\n')
    out, _, problems = merged([str(path)], monkeypatch=monkeypatch)
    lines = out.splitlines(keepends=True)
    assert lines[0] == b'{"id": "1", "run": 0}\n'  # no BOM, no CR
    second = json.loads(lines[1])
    assert lines[1].endswith(b"\n") and b"\\ud800" not in lines[1] and second["id"] == "2"
    second["q"].encode("utf-8")  # no lone surrogate left: the line is valid UTF-8 JSON
    assert "lone surrogate" in problems.stream.getvalue()


def test_a_different_model_or_judge_for_the_same_row_is_a_conflict(tmp_path, monkeypatch):
    a = tmp_path / "a.jsonl"
    a.write_text(
        '{"id": "1", "run": 0, "model": "m1", "judge_version": "j1"}\n'
        '{"id": "2", "run": 0, "model": "m1", "judge_version": "j1"}\n'
    )
    b = tmp_path / "b.jsonl"
    b.write_text(
        '{"id": "1", "run": 0, "model": "m2", "judge_version": "j1"}\n'
        '{"id": "2", "run": 0, "model": "m1", "judge_version": "j1"}\n'
    )
    _, result, _ = merged([str(a), str(b)], monkeypatch=monkeypatch)
    assert result.replaced == 2
    assert result.conflicts == [f"{b}:1: id 1 run 0 replaces a row with model 'm1' by one with 'm2'"]


def test_bad_lines_are_named_and_cost_only_themselves(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "1", "run": 0}\n{"id": "2", "run": "x"}\n[1]\n{"run": 1}\n{"id": "3"}\n')
    out, _, problems = merged([str(path)], monkeypatch=monkeypatch)
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["1", "3"]
    said = problems.stream.getvalue()
    assert problems.count == 3 and f"{path}:2: 'run' must be an integer" in said
    assert f"{path}:3: expected a JSON object" in said and f"{path}:4: missing 'id'" in said


def test_an_output_file_is_replaced_whole_or_not_at_all(tmp_path):
    source = tmp_path / "r.jsonl"
    source.write_text("".join(json.dumps({"id": str(i), "run": 0}) + "\n" for i in range(100)))
    out = tmp_path / "out.jsonl"
    out.write_text("the old results\n")
    result = merge_rows(read_records([str(source)], Problems(stream=io.StringIO()), check_row))
    source.unlink()  # the copy fails: the rows cannot be read back
    with pytest.raises(Fatal):  # said as a one-line error by the command line
        write_rows(result, ordered_keys(result, False), out)
    assert out.read_text() == "the old results\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "out.jsonl"
    ]
    source.write_text("".join(json.dumps({"id": str(i), "run": 0}) + "\n" for i in range(100)))
    result = merge_rows(read_records([str(source)], Problems(stream=io.StringIO()), check_row))
    write_rows(result, ordered_keys(result, False), out)
    assert out.read_bytes() == source.read_bytes()
