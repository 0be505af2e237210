"""Honest reports: failed rows in the denominator, nothing pooled or counted twice, exit statuses,
and streamed figures equal to those of a plain reading of every row."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import defaultdict

import pytest
from support.commands import bv_inproc

from bv.core.stats import mean, pstdev
from bv.reporting.report import build_report, summarize


def row(i: int, run: int, hard: int | None, **extra) -> dict:
    return {
        "id": str(i),
        "run": run,
        "hard": hard,
        "type": f"T{i % 3}",
        "subtype": f"S{i % 5}",
        "ans_type": "choice" if i % 2 else "blank",
        "choices": [{"label": c, "text": c} for c in "ABC"] if i % 2 else [],
        "answer": ["A"],
        "decided_by": "rules" if hard is not None else "error",
        "error": None,
        "model": "m1",
        **extra,
    }


def write(path, data):
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return path


def random_rows(seed: int, items: int = 40, runs: int = 3) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for run in range(runs):
        for i in range(items):
            kind = rng.random()
            hard = None if kind < 0.05 else int(rng.random() < 0.5)
            extra = {"error": "HTTP 500"} if 0.05 <= kind < 0.1 else {}
            if 0.1 <= kind < 0.15:
                extra["undecided"] = True
            out.append(row(i, run, hard if not extra else (hard or 0 if hard is not None else None), **extra))
    rng.shuffle(out)
    return out


def plain_accuracy(rows: list[dict], exclude_failed: bool) -> float:
    """The accuracy read the simplest way: every row kept, grouped by run, averaged."""
    by_run = defaultdict(list)
    for r in rows:
        failed = r.get("error") or r["hard"] is None or r.get("undecided")
        if not (exclude_failed and failed):
            by_run[r["run"]].append(r["hard"] == 1)
    return round(mean([sum(v) / len(v) for _, v in sorted(by_run.items()) if v]), 6)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("exclude_failed", [False, True])
def test_streamed_figures_equal_a_plain_reading(seed, exclude_failed):
    data = random_rows(seed)
    summary = summarize(data, exclude_failed=exclude_failed)
    assert summary["overall"]["accuracy"] == plain_accuracy(data, exclude_failed)
    for subtype, cell in summary["by_subtype"].items():
        members = [r for r in data if r["subtype"] == subtype]
        assert cell["accuracy"] == plain_accuracy(members, exclude_failed)
        assert cell["n"] == len({r["id"] for r in members}) and cell["rows"] == len(members)
    runs = defaultdict(list)
    for r in data:
        runs[r["run"]].append(r["hard"] == 1)
    if not exclude_failed:
        assert summary["overall"]["std"] == round(pstdev([sum(v) / len(v) for v in runs.values()]), 6)


def test_sharded_and_merged_inputs_give_the_same_report(tmp_path):
    data = sorted(random_rows(7), key=lambda r: (int(r["id"]), r["run"]))
    whole = write(tmp_path / "whole.jsonl", data)
    write(tmp_path / "s0.jsonl", data[::2])
    write(tmp_path / "s1.jsonl", data[1::2])
    merged = bv_inproc("bv merge s1.jsonl s0.jsonl --sort -o merged.jsonl", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    one = json.loads(bv_inproc(f"bv report --format json {whole}").stdout)["inputs"][0]
    two = json.loads(bv_inproc(f"bv report --format json {tmp_path}/merged.jsonl").stdout)["inputs"][0]
    shards = (tmp_path / "s0.jsonl").read_text() + (tmp_path / "s1.jsonl").read_text()
    piped = json.loads(bv_inproc("bv report --format json", input=shards).stdout)["inputs"][0]
    for other in (two, piped):
        assert {k: v for k, v in other.items() if k != "name"} == {
            k: v for k, v in one.items() if k != "name"
        }


def test_failed_rows_count_wrong_warn_and_exit_1(tmp_path):
    data = [row(i, 0, 1) for i in range(6)]
    data[0].update(error="HTTP 500 (gave up after 6 tries)", hard=0)
    data[1].update(hard=None, decided_by="error")
    data[2].update(undecided=True, hard=0)
    path = write(tmp_path / "r.jsonl", data)
    result = bv_inproc(f"bv report --format json {path}")
    assert result.returncode == 1
    overall = json.loads(result.stdout)["inputs"][0]["overall"]
    assert overall["accuracy"] == 0.5 and overall["correct"] == 3 and overall["denominator"] == 6
    assert (overall["errors"], overall["judge_errors"], overall["undecided"]) == (1, 1, 1)
    assert "1 rollout error(s): re-run bv rollout" in result.stderr
    assert "1 judge error(s): re-run bv judge" in result.stderr
    assert "1 undecided row(s): configure an LLM judge" in result.stderr
    assert "counted wrong in the accuracy" in result.stderr


def test_exclude_failed_is_labelled_in_every_format(tmp_path):
    data = [row(i, 0, 1) for i in range(4)]
    data[0].update(error="HTTP 500", hard=0)
    path = write(tmp_path / "r.jsonl", data)
    report = json.loads(bv_inproc(f"bv report --exclude-failed --format json {path}").stdout)["inputs"][0]
    assert report["overall"]["accuracy"] == 1.0 and report["accuracy_over"].startswith("finished rows")
    table = bv_inproc(f"bv report --exclude-failed {path}")
    assert "finished rows" in table.stdout and "left out of the accuracy" in table.stderr
    assert (
        "accuracy % (finished rows)"
        in bv_inproc(f"bv report --exclude-failed --format markdown {path}").stdout
    )
    csv_rows = list(
        csv.DictReader(io.StringIO(bv_inproc(f"bv report --exclude-failed --format csv {path}").stdout))
    )
    assert csv_rows[0]["accuracy_over"] == "finished rows (--exclude-failed)"
    all_rows = list(csv.DictReader(io.StringIO(bv_inproc(f"bv report --format csv {path}").stdout)))
    assert all_rows[0]["accuracy_over"] == "all rows"
    html = bv_inproc(f"bv report --exclude-failed --format json {path} --html {tmp_path}/r.html")
    assert "accuracy % (finished rows)" in (tmp_path / "r.html").read_text(), html.stderr


def test_failed_counts_side_by_side(tmp_path):
    a = [row(i, 0, 1) for i in range(4)]
    b = [row(i, 0, 1) for i in range(4)]
    b[1].update(hard=None, decided_by="error")
    pa, pb = write(tmp_path / "a.jsonl", a), write(tmp_path / "b.jsonl", b)
    out = bv_inproc(f"bv report --format markdown {pa} {pb}").stdout
    # a 4/4 and b 3/4 with their Clopper-Pearson intervals; one run per item, so the difference's interval is
    # Newcombe's (a does not vary: correlation 0), and its own two-sided p is 0.32
    assert "a err/judge/und" in out
    assert (
        "| **Overall** | 4 | 100.0 [39.8–100.0] | 75.0 [19.4–99.4] | -25.0 [-69.9, +28.1] | 0.32"
        " | 0/0/0 | 0/1/0 |" in out
    )


def test_empty_input_and_not_judged_rows_are_errors_naming_the_file(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = bv_inproc(f"bv report {empty}")
    assert result.returncode == 1 and f"{empty}: no judged rows" in result.stderr and not result.stdout
    rollout = write(tmp_path / "rollout.jsonl", [{"id": "1", "run": 0, "response": "x", "question": "q"}])
    result = bv_inproc(f"bv report {rollout}")
    assert (
        result.returncode == 1
        and f"{rollout}:1: a rollout row" in result.stderr
        and "bv judge" in result.stderr
    )
    items = write(tmp_path / "items.jsonl", [{"id": "1", "question": "q", "answer": ["A"]}])
    result = bv_inproc(f"bv report --format json {items}")
    assert result.returncode == 1 and f"{items}:1: not a judged row" in result.stderr and not result.stdout
    assert "Traceback" not in result.stderr


def test_repeated_id_run_is_an_error_pointing_to_merge(tmp_path):
    data = [row(i, 0, 1) for i in range(3)] + [row(1, 0, 0), row(2, 0, 1)]
    result = bv_inproc(f"bv report {write(tmp_path / 'r.jsonl', data)}")
    assert result.returncode == 1 and not result.stdout
    assert "2 row(s) repeat an (id, run)" in result.stderr and "id 1 run 0 (" in result.stderr
    assert "r.jsonl:4" in result.stderr and "bv merge" in result.stderr


def test_several_models_in_one_input_need_by(tmp_path):
    data = [row(i, 0, 1) for i in range(4)] + [row(i, 0, int(i < 1), model="m2") for i in range(4)]
    path = write(tmp_path / "all.jsonl", data)
    result = bv_inproc(f"bv report {path}")
    assert result.returncode == 1 and "2 models (m1, m2)" in result.stderr and "--by model" in result.stderr
    split = bv_inproc(f"bv report --by model --format json {path}")
    assert split.returncode == 0, split.stderr
    report = json.loads(split.stdout)
    assert [s["name"] for s in report["inputs"]] == ["m1", "m2"]
    assert [s["overall"]["accuracy"] for s in report["inputs"]] == [1.0, 0.25]
    assert report["comparison"]["paired"]["regressed"] == 3


def test_several_skills_or_judge_versions_need_by(tmp_path):
    skills = [row(i, 0, 1, skill={"name": "s", "sha256": f"{i % 2}" * 64}) for i in range(4)]
    result = bv_inproc(f"bv report {write(tmp_path / 'a.jsonl', skills)}")
    assert result.returncode == 1 and "--by skill" in result.stderr
    judges = [row(i, 0, 1, judge_version=str(i % 2)) for i in range(4)]
    result = bv_inproc(f"bv report {write(tmp_path / 'b.jsonl', judges)}")
    assert (
        result.returncode == 1
        and "2 judge versions" in result.stderr
        and "--by judge_version" in result.stderr
    )


def test_prompt_styles_or_replaced_templates_need_by(tmp_path):
    styles = [row(i, 0, 1, **({"style": "official"} if i % 2 else {})) for i in range(4)]
    result = bv_inproc(f"bv report {write(tmp_path / 'a.jsonl', styles)}")
    assert result.returncode == 1 and "2 prompt styles (bv, official)" in result.stderr
    assert "--by style" in result.stderr
    split = json.loads(bv_inproc(f"bv report --by style --format json {tmp_path / 'a.jsonl'}").stdout)
    assert [s["name"] for s in split["inputs"]] == ["bv", "official"]
    refine = {"rollout_templates": {"refine.md": "ab" * 32}}
    replaced = [row(i, 0, 1, **(refine if i % 2 else {})) for i in range(4)]
    result = bv_inproc(f"bv report {write(tmp_path / 'b.jsonl', replaced)}")
    assert result.returncode == 1 and "replaced prompt templates" in result.stderr
    assert "refine.md@abababab" in result.stderr and "--by prompts" in result.stderr


def test_comparison_with_stdin_and_a_second_pass(tmp_path):
    a = [row(i, 0, 1) for i in range(6)]
    b = [row(i, 0, i % 2) for i in range(4)]
    pb = write(tmp_path / "b.jsonl", b)
    report = json.loads(
        bv_inproc(f"bv report --format json a=- {pb}", input="".join(json.dumps(r) + "\n" for r in a)).stdout
    )
    assert report["comparison"]["left_out"] == {"a": 2, "b": 0}
    assert report["inputs"][0]["overall"]["rows"] == 4 and report["inputs"][0]["overall"]["accuracy"] == 1.0
    in_process, kept = build_report([("a", a), ("b", b)], keep_rows=True)
    assert in_process == report | {"inputs": in_process["inputs"]} and [len(list(k)) for k in kept] == [4, 4]


def test_provenance_per_input(tmp_path):
    data = [
        row(i, 0, 1, endpoint="http://127.0.0.1:9/v1", bv_version="0.9", started_at=f"2026-11-30T09:0{i}:00Z")
        for i in range(3)
    ] + [row(3, 0, 1)]  # a row made before provenance: shown as far as the rows say
    path = write(tmp_path / "r.jsonl", data)
    report = json.loads(bv_inproc(f"bv report --format json {path}").stdout)["inputs"][0]
    assert report["provenance"] == {
        "endpoints": ["http://127.0.0.1:9/v1"],
        "bv_versions": ["0.9"],
        "backends": [],
        "params": [],
        "judge_models": [],
        "started_at": {"first": "2026-11-30T09:00:00Z", "last": "2026-11-30T09:02:00Z"},
        "made_by": {"skill": "no skill", "style": "bv", "prompts": "bv's own", "judge_version": "none"},
    }
    table = bv_inproc(f"bv report {path}").stdout
    assert (
        "endpoint http://127.0.0.1:9/v1; skill no skill; style bv; prompts bv's own; judge rules;"
        " judge version none; bv 0.9; rows made 2026-11-30T09:00:00Z to 2026-11-30T09:02:00Z" in table
    )


def test_merge_with_a_missing_input_leaves_the_old_output(tmp_path):
    good = write(tmp_path / "good.jsonl", [row(i, 0, 1) for i in range(3)])
    out = tmp_path / "m.jsonl"
    out.write_text("old\n")
    result = bv_inproc(f"bv merge {good} {tmp_path}/missing.jsonl -o {out}")
    assert result.returncode == 1 and "missing.jsonl: no such file" in result.stderr
    assert out.read_text() == "old\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + "{not json\n")
    result = bv_inproc(f"bv merge {bad} -o {out}")
    assert result.returncode == 1 and f"{out} not written" in result.stderr and out.read_text() == "old\n"
    result = bv_inproc(f"bv merge {bad} -o {out} --skip-bad")
    assert result.returncode == 0 and [json.loads(x) for x in out.read_text().splitlines()] == [
        json.loads(x) for x in good.read_text().splitlines()
    ]


def old_merge(paths: list, sort: bool) -> list[dict]:
    """Merge as bv did before offsets: every row in a dict, the last one winning."""
    from bv.core.records import natural_key, row_key

    kept: dict = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8-sig").splitlines():
            record = json.loads(line)
            kept.pop(row_key(record), None)
            kept[row_key(record)] = record
    rows = list(kept.values())
    if sort:
        rows.sort(key=lambda r: (natural_key(str(r["id"])), r.get("run", 0)))
    return rows


@pytest.mark.parametrize("sort", [False, True])
def test_merge_by_offsets_writes_what_the_old_merge_wrote(tmp_path, sort):
    data = random_rows(3, items=30)
    lines = [json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in data]
    half = len(lines) // 2
    first = tmp_path / "a.jsonl"  # with a byte order mark and CRLF line ends
    first.write_bytes(b"\xef\xbb\xbf" + "".join(lines[:half]).encode().replace(b"\n", b"\r\n"))
    second = tmp_path / "b.jsonl"
    second.write_text("".join(lines[half:] + lines[: half // 2]))
    stdin = "".join(json.dumps(r | {"hard": 1}, separators=(",", ":")) + "\n" for r in data[:10])
    flag = "--sort" if sort else ""
    result = bv_inproc(f"bv merge {first} - {second} {flag}", input=stdin)
    assert result.returncode == 0, result.stderr
    stdin_file = tmp_path / "stdin.jsonl"
    stdin_file.write_text(stdin)
    expected = old_merge([first, stdin_file, second], sort)
    assert [json.loads(line) for line in result.stdout.splitlines()] == expected
    assert result.stdout == "".join(
        json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in expected
    )


def test_html_reads_the_rows_again_also_from_stdin(tmp_path):
    data = [row(i, 0, i % 2) for i in range(6)]
    text = "".join(json.dumps(r) + "\n" for r in data)
    result = bv_inproc(f"bv report --html {tmp_path}/p.html --format json", input=text)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "p.html").read_text()
    assert page.count('<article class="card"') == 6
    both = text + "".join(json.dumps(row(i, 0, 1, model="m2")) + "\n" for i in range(4))
    split = bv_inproc(f"bv report --by model --html {tmp_path}/q.html -", input=both)
    assert split.returncode == 0, split.stderr
    assert (tmp_path / "q.html").read_text().count('<article class="card"') == 4  # the items m1 and m2 share
