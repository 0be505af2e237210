"""Trying a few items first: bv prompt --limit/--ids/--type/--subtype/--sample, deterministic."""

from __future__ import annotations

import random
import shutil
from collections import Counter

from support.commands import bv_inproc, jsonl, read_items

from bv.core.selection import Selection, quotas, select, stratified_sample


def _items(n: int) -> list[dict]:
    subtypes = ["a"] * 50 + ["b"] * 30 + ["c"] * 15 + ["d"] * 4 + ["e"]
    return [{"id": str(i), "type": "T", "subtype": subtypes[i % len(subtypes)]} for i in range(n)]


def test_quotas_proportional_and_every_subtype_once_when_possible():
    sizes = {"a": 50, "b": 30, "c": 15, "d": 4, "e": 1}
    assert quotas(sizes, 10) == {"a": 4, "b": 3, "c": 1, "d": 1, "e": 1}
    assert quotas(sizes, 3) == {"a": 2, "b": 1, "c": 0, "d": 0, "e": 0}
    assert quotas(sizes, 1000) == sizes  # never more than a subtype has


def test_sample_is_deterministic_stratified_and_independent_of_order():
    items = _items(100)
    first = stratified_sample(items, 20, seed=3)
    assert first == stratified_sample(items, 20, seed=3)
    shuffled = items[:]
    random.Random(1).shuffle(shuffled)
    assert {i["id"] for i in stratified_sample(shuffled, 20, seed=3)} == {i["id"] for i in first}
    assert {i["id"] for i in stratified_sample(items, 20, seed=4)} != {i["id"] for i in first}
    counts = Counter(i["subtype"] for i in first)
    assert counts == {"a": 9, "b": 6, "c": 3, "d": 1, "e": 1}
    assert [i["id"] for i in first] == sorted((i["id"] for i in first), key=int)  # input order kept


def test_filters_combine_ids_types_subtypes_limit():
    items = _items(100)
    kept = list(select(items, Selection(subtypes=("B", "c"), limit=3)))
    assert [i["id"] for i in kept] == ["50", "51", "52"]
    kept = list(select(items, Selection(ids=("7", "60", "99"), subtypes=("b",))))
    assert [i["id"] for i in kept] == ["60"]


def test_prompt_filters_through_the_cli(sample_dir):
    items = sample_dir / "meta_data.jsonl"
    limited = bv_inproc(f"bv prompt {items} --limit 2")
    assert limited.returncode == 0 and [r["id"] for r in jsonl(limited.stdout)] == ["1", "2"]
    chosen = bv_inproc(f"bv prompt {items} --ids 3,5 --ids 11")
    assert [r["id"] for r in jsonl(chosen.stdout)] == ["3", "5", "11"]
    typed = bv_inproc(f"bv prompt {items} --type 'visual tracking' --subtype 'Connect the lines'")
    assert {r["type"] for r in jsonl(typed.stdout)} == {"Visual Tracking"}
    assert len(jsonl(typed.stdout)) == sum(
        1 for i in read_items(sample_dir) if i["type"] == "Visual Tracking"
    )


def test_prompt_sample_same_twice_and_from_shuffled_input(sample_dir, tmp_path):
    items = sample_dir / "meta_data.jsonl"
    lines = items.read_text().splitlines(keepends=True)
    random.Random(0).shuffle(lines)
    shutil.copytree(sample_dir / "images", tmp_path / "images")
    (tmp_path / "shuffled.jsonl").write_text("".join(lines))
    runs = [
        bv_inproc(f"bv prompt {path} --sample 6 --sample-seed 5")
        for path in (items, items, tmp_path / "shuffled.jsonl")
    ]
    ids = [sorted(r["id"] for r in jsonl(run.stdout)) for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert ids[0] == ids[1] == ids[2] and len(ids[0]) == 6
    subtypes = {r["subtype"] for r in jsonl(runs[0].stdout)}
    assert len(subtypes) == len({i["subtype"] for i in read_items(sample_dir)})  # every subtype once


def test_prompt_unknown_id_or_type_is_an_error(sample_dir):
    result = bv_inproc(f"bv prompt {sample_dir / 'meta_data.jsonl'} --ids 1,999 --type Nope")
    assert result.returncode == 1
    assert "--ids: no item matches '999'" in result.stderr
    assert "--type: no item matches 'Nope'" in result.stderr
    assert result.stdout == ""  # item 1 is not of type Nope
