"""bv optimize's split: deterministic, stratified by subtype, in the ratio, each item in one part."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from bv.core.errors import BadRecord
from bv.optimize.split import parse_ratio, read_split, stratified_split

SUBTYPES = {f"{i}": f"s{i % 4}" for i in range(1, 101)}  # 4 subtypes of 25 items


def test_the_split_is_stratified_in_the_ratio_and_disjoint():
    split = stratified_split(SUBTYPES, (2, 1, 7), seed=0)
    parts = [set(split.train), set(split.selection), set(split.test)]
    assert sum(map(len, parts)) == 100 and set().union(*parts) == set(SUBTYPES)
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    for subtype in {"s0", "s1", "s2", "s3"}:  # 25 items: 5 / 2.5 / 17.5 by largest remainder
        counts = [sum(SUBTYPES[i] == subtype for i in part) for part in parts]
        assert counts[0] == 5 and counts[1] in (2, 3) and counts[2] in (17, 18) and sum(counts) == 25


def test_the_split_depends_on_the_seed_and_ids_not_on_their_order():
    reversed_items = dict(reversed(list(SUBTYPES.items())))
    assert stratified_split(SUBTYPES, seed=3) == stratified_split(reversed_items, seed=3)
    assert stratified_split(SUBTYPES, seed=3).train != stratified_split(SUBTYPES, seed=4).train


def test_a_small_subtype_still_lands_whole():
    split = stratified_split({"a": "only", "b": "pair", "c": "pair"}, (2, 1, 7))
    assert Counter(len(split.part(p)) for p in ("train", "selection", "test")).total() == 3
    assert "a" in split.test  # one item: the largest share


@pytest.mark.parametrize("text", ["2:1", "2:0:7", "a:b:c", "-1:1:1", ""])
def test_a_bad_ratio_is_refused(text):
    with pytest.raises(ValueError, match="three positive whole numbers"):
        parse_ratio(text)


def test_a_given_split_is_read_and_checked(tmp_path):
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"train": ["1", 2], "selection": ["3"], "test": ["4"]}))
    split = read_split(path, ["1", "2", "3", "4", "5"])
    assert split.train == ("1", "2") and split.test == ("4",) and "given" in split.method
    for bad, message in [
        ({"train": ["1"], "selection": ["1"], "test": ["4"]}, "in both train and selection"),
        ({"train": ["9"], "selection": ["3"], "test": ["4"]}, "not an item of the input"),
        ({"train": [], "selection": ["3"], "test": ["4"]}, "non-empty list"),
        ({"train": [True], "selection": ["3"], "test": ["4"]}, "an item id is a string"),
    ]:
        path.write_text(json.dumps(bad))
        with pytest.raises(BadRecord, match=message):
            read_split(path, ["1", "2", "3", "4"])
    path.write_text("[[[[")
    with pytest.raises(BadRecord, match="not JSON"):
        read_split(path, ["1"])
