"""What bv eval and bv report say of undecided rows: a run judged by the rules alone on purpose
(`--mode rules`, its run folder's config says so) is told how many the rules left, as a note, not
warned to configure an LLM judge; rows whose judging is not known (a results file) still are."""

from __future__ import annotations

from support.commands import bv_inproc, jsonl


def test_rules_on_purpose_is_a_note_and_rows_of_unknown_judging_get_the_advice(sample_dir, server, tmp_path):
    run = tmp_path / "run"
    model = f"{sample_dir / 'meta_data.jsonl'} -m m --base-url {server.base_url} --no-cache"
    made = bv_inproc(f"bv eval {model} --mode rules -o {run}")
    assert made.returncode == 0, made.stderr
    undecided = sum(r["undecided"] for r in jsonl((run / "results.jsonl").read_text()))
    assert undecided  # blank items answered A: the rules cannot decide them
    said = f"{undecided} undecided row(s), which a judge of rules alone (mode rules) cannot decide"
    assert f": note: run: {said}" in made.stderr and "configure an LLM judge" not in made.stderr
    folder = bv_inproc(f"bv report {run}")
    assert f"bv report: note: run: {said}" in folder.stderr
    assert "configure an LLM judge" not in folder.stderr
    as_file = bv_inproc(f"bv report {run / 'results.jsonl'}")  # who judged it, and how, is not known
    assert f"{undecided} undecided row(s): configure an LLM judge" in as_file.stderr
    auto = bv_inproc(f"bv eval {model} -o {tmp_path / 'auto'}")
    assert "undecided row(s): configure an LLM judge" in auto.stderr  # auto wanted one and had none
