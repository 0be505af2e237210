"""What bv.api's functions take (bv/api/inputs.py): what the matching command takes (a file or a
run folder as a str or a Path, several inputs by name), and bad input a BVError in the command's
words, never a bare Python error."""

from __future__ import annotations

import json

import pytest

from bv import api
from bv.core.errors import BadConfig, BadRecord, BVError


def test_report_takes_a_bv_eval_run_folder_as_bv_report_does(sample_dir, tmp_path):
    """`api.report("runs/x")` raised IsADirectoryError (issue 44)."""
    items = sample_dir / "meta_data.jsonl"
    for label in ("a", "b"):
        api.evaluate(items, tmp_path / label, backend="chance", seed=1, mode="rules", cache=None, limit=4)
    one = api.report(str(tmp_path / "a"))
    assert one.accuracy == {"a": pytest.approx(one.summaries[0]["overall"]["accuracy"])}
    both = api.report({"first": tmp_path / "a", "second": str(tmp_path / "b")})
    assert set(both.accuracy) == {"first", "second"} and both.paired is not None


def test_prompt_takes_an_items_file_and_finds_its_images_beside_it(sample_dir, tmp_path, monkeypatch):
    """`api.prompt("items.jsonl")` said "dictionary update sequence element #0" (issue 44)."""
    monkeypatch.chdir(tmp_path)  # the images are beside the file, not in the current folder
    from_file = list(api.prompt(str(sample_dir / "meta_data.jsonl")))
    items = [json.loads(line) for line in (sample_dir / "meta_data.jsonl").read_text().splitlines()]
    from_list = list(api.prompt(items, image_root=sample_dir))
    assert from_file == from_list and len(from_file) == len(items)


def test_rollout_judge_and_merge_take_files(sample_dir, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    records = list(api.prompt(sample_dir / "meta_data.jsonl"))[:3]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in records))
    rows = api.rollout(prompts, backend="chance", cache=None)
    rolled = tmp_path / "rollout.jsonl"
    rolled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judged = api.judge(str(rolled), mode="rules")
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in judged))
    assert api.merge(results, str(results)) == api.merge(judged)


@pytest.mark.parametrize(
    ("call", "kind", "words"),
    [
        (lambda: api.report({}), BadConfig, "no inputs"),  # "min() arg is an empty sequence" before
        (lambda: api.report(5), BadConfig, "a JSONL file .* not a int"),
        (lambda: api.report([1, 2]), BadRecord, "judged row 0: expected a JSON object"),
        (lambda: api.report("missing.jsonl"), BadConfig, "missing.jsonl: file not found"),
        (lambda: list(api.prompt(["a"])), BadRecord, "item 0: expected a JSON object"),
        (lambda: list(api.prompt({"id": 1})), BadConfig, "items: give a JSONL file"),
        (lambda: api.rollout([{"id": "x"}], backend="chance"), BadRecord, "prompt record 0"),
        (
            lambda: api.rollout([], backend="chance", repeats="3"),
            BadConfig,
            "`repeats` must be a whole number",
        ),
        (lambda: api.rollout([], backend="chance", jobs=None), BadConfig, "`jobs` must be a number"),
        (lambda: api.judge(None, mode="rules"), BadConfig, "rows: give a JSONL file"),
        (lambda: api.merge(3), BadConfig, "input 1: give a JSONL file"),
        (lambda: api.evaluate(5, "out", backend="chance"), BadConfig, "`items` must be a path"),
        (lambda: api.evaluate("i.jsonl", None, backend="chance"), BadConfig, "`out` must be a path"),
        (lambda: api.plan_optimize(5, skill="s.md", out="o", optimizer_model="m"), BadConfig, "`items` must"),
    ],
)
def test_bad_input_raises_a_bv_error_in_the_commands_words(call, kind, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(kind, match=words) as raised:
        call()
    assert isinstance(raised.value, BVError)
