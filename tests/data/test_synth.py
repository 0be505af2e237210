"""Tests for the synthetic BabyVision-style sample set (bv.data.synth)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from bv.data import synth

FIELDS = {
    "taskId",
    "question",
    "image",
    "ansType",
    "options",
    "choiceAns",
    "blankAns",
    "type",
    "subtype",
    "coT",
}
CATEGORIES = {
    "Fine-grained Discrimination",
    "Visual Tracking",
    "Spatial Perception",
    "Visual Pattern Recognition",
}
FORMAT_OF_EXT = {"png": "PNG", "jpg": "JPEG", "webp": "WEBP"}


def _write(root: Path, n: int, seed: int) -> Path:
    out = root / f"n{n}-s{seed}"
    assert synth.write_sample_set(out, n, seed) == n
    return out


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "meta_data.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("synth")


@pytest.fixture(scope="module")
def big(root: Path) -> Path:
    """40 items: enough for every family several times and for all three image formats."""
    return _write(root, 40, 0)


@pytest.fixture(scope="module")
def mixed(root: Path) -> Path:
    """72 items: a dozen of each family, each family in PNG, JPEG and WebP."""
    return _write(root, 72, 5)


def test_same_seed_gives_identical_bytes(big: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    synth.write_sample_set(again, 40, 0)
    assert (again / "meta_data.jsonl").read_bytes() == (big / "meta_data.jsonl").read_bytes()
    for rec in _records(big):
        assert (again / rec["image"]).read_bytes() == (big / rec["image"]).read_bytes(), rec["image"]


def test_different_seed_differs(big: Path, root: Path) -> None:
    other = _write(root, 40, 1)
    a, b = _records(big), _records(other)
    assert [r["subtype"] for r in a] == [r["subtype"] for r in b]  # same schedule ...
    changed = sum((big / r["image"]).read_bytes() != (other / r["image"]).read_bytes() for r in a)
    assert changed == len(a)  # ... different pictures
    assert sum(x != y for x, y in zip(a, b, strict=True)) > len(a) // 2  # mostly different answers


def test_smaller_n_is_a_prefix(root: Path) -> None:
    small, large = _write(root, 8, 3), _write(root, 20, 3)
    assert _records(small) == _records(large)[:8]
    for rec in _records(small):
        assert Image.open(small / rec["image"]).tobytes() == Image.open(large / rec["image"]).tobytes()


def test_schema(big: Path) -> None:
    records = _records(big)
    assert [r["taskId"] for r in records] == list(range(1, 41))
    for rec in records:
        assert set(rec) == FIELDS
        assert (rec["type"], rec["subtype"], rec["ansType"]) in synth.TASK_FAMILIES
        assert isinstance(rec["question"], str) and rec["question"].strip()
        assert isinstance(rec["coT"], str) and rec["coT"].strip()
        assert re.fullmatch(rf"images/{rec['taskId']}\.(png|jpg|webp)", rec["image"])
        if rec["ansType"] == "choice":
            opts = rec["options"]
            assert len(opts) >= 3 and len(set(opts)) == len(opts)
            assert all(isinstance(o, str) and o for o in opts)
            assert type(rec["choiceAns"]) is int and 0 <= rec["choiceAns"] < len(opts)
            assert rec["blankAns"] is None
        else:
            assert rec["ansType"] == "blank"
            assert rec["options"] == [] and rec["choiceAns"] is None
            assert isinstance(rec["blankAns"], str) and rec["blankAns"].strip()
        with Image.open(big / rec["image"]) as img:
            img.load()
            assert 320 <= img.width <= 640 and 100 <= img.height <= 640
            assert img.format == FORMAT_OF_EXT[rec["image"].rsplit(".", 1)[1]]


def test_all_three_formats_present(big: Path) -> None:
    formats = {Image.open(big / r["image"]).format for r in _records(big)}
    assert formats == {"PNG", "JPEG", "WEBP"}


def test_every_small_n_covers_categories_and_answer_types(big: Path) -> None:
    records = _records(big)
    for n in (4, 8):
        assert {r["type"] for r in records[:n]} == CATEGORIES
        assert {r["ansType"] for r in records[:n]} == {"choice", "blank"}
    assert {(r["type"], r["subtype"], r["ansType"]) for r in records} == set(synth.TASK_FAMILIES)


def test_creates_dirs_overwrites_and_handles_zero(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    assert synth.write_sample_set(out, 6, 0) == 6
    (out / "images" / "1.png").write_bytes(b"junk")
    assert synth.write_sample_set(out, 6, 0) == 6
    assert Image.open(out / "images" / "1.png").format == "PNG"
    assert synth.write_sample_set(out, 0, 0) == 0
    assert (out / "meta_data.jsonl").read_text() == ""
    with pytest.raises(ValueError):
        synth.write_sample_set(out, -1, 0)


# --- ground truth re-derived from the pixels ---------------------------------------------------


def _line_runs(counts: list[int], threshold: float) -> list[tuple[int, int]]:
    """Runs of consecutive indices whose dark-pixel count reaches threshold: the grid lines."""
    runs: list[tuple[int, int]] = []
    for i, c in enumerate(counts):
        if c >= threshold:
            if runs and runs[-1][1] == i - 1:
                runs[-1] = (runs[-1][0], i)
            else:
                runs.append((i, i))
    return runs


def _changed_pixels(a: Image.Image, b: Image.Image) -> int:
    """Pixels where some channel differs by more than 64 (compression noise stays below that)."""
    r, g, b_ = ImageChops.difference(a, b).split()
    worst = ImageChops.lighter(ImageChops.lighter(r, g), b_)
    return worst.point(lambda v: 255 if v > 64 else 0).histogram()[255]


def _odd_cell(img: Image.Image) -> tuple[int, int]:
    """Find the grid from its dark lines, then the one cell unlike the others; 1-based (row, col)."""
    img = img.convert("RGB")
    w, h = img.size
    dark = [v < 80 for v in img.convert("L").tobytes()]
    cols = _line_runs([sum(dark[y * w + x] for y in range(h)) for x in range(w)], 0.5 * h)
    rows = _line_runs([sum(dark[y * w : (y + 1) * w]) for y in range(h)], 0.5 * w)
    size_x = min(b[0] - a[1] for a, b in itertools.pairwise(cols)) - 4
    size_y = min(b[0] - a[1] for a, b in itertools.pairwise(rows)) - 4
    cells = {
        (i + 1, j + 1): img.crop((cx[1] + 2, ry[1] + 2, cx[1] + 2 + size_x, ry[1] + 2 + size_y))
        for i, ry in enumerate(rows[:-1])
        for j, cx in enumerate(cols[:-1])
    }
    assert len(cells) >= 12
    score = {}
    for key, crop in cells.items():
        diffs = sorted(_changed_pixels(crop, other) for k, other in cells.items() if k != key)
        score[key] = diffs[len(diffs) // 2]
    ranked = sorted(score, key=score.get, reverse=True)
    assert score[ranked[0]] >= 8 and score[ranked[1]] * 4 <= score[ranked[0]], score
    return ranked[0]


def _components(mask: Image.Image, min_size: int) -> int:
    """Number of 4-connected blobs of at least min_size set pixels in an L-mode mask."""
    w = mask.width
    todo = {i for i, v in enumerate(mask.tobytes()) if v}
    count = 0
    while todo:
        stack, size = [todo.pop()], 0
        while stack:
            p = stack.pop()
            size += 1
            for q in (p - 1, p + 1, p - w, p + w):
                if q in todo:
                    todo.remove(q)
                    stack.append(q)
        count += size >= min_size
    return count


def _cube_tops(img: Image.Image) -> int:
    img = img.convert("RGB")
    total = 0
    for top, _, _ in synth.CUBE_FACES:
        r, g, b = ImageChops.difference(img, Image.new("RGB", img.size, top)).split()
        worst = ImageChops.lighter(ImageChops.lighter(r, g), b)
        total += _components(worst.point(lambda v: 255 if v <= 40 else 0), min_size=60)
    return total


def _items(out: Path, subtype: str) -> list[tuple[dict, Image.Image]]:
    items = [(r, Image.open(out / r["image"])) for r in _records(out) if r["subtype"] == subtype]
    assert items
    return items


def test_find_the_different_answer_matches_pixels(mixed: Path) -> None:
    items = _items(mixed, "Find the different")
    assert {img.format for _, img in items} == {"PNG", "JPEG", "WEBP"}
    for rec, img in items:
        assert "(row,col)" in rec["question"]
        row, col = _odd_cell(img)
        assert rec["blankAns"] == f"({row},{col})", rec


def test_count_blocks_answer_matches_pixels(mixed: Path) -> None:
    answers = set()
    items = _items(mixed, "Count 3D blocks")
    assert {img.format for _, img in items} == {"PNG", "JPEG", "WEBP"}
    for rec, img in items:
        assert rec["blankAns"].isdigit()
        assert _cube_tops(img) == int(rec["blankAns"]), rec
        answers.add(rec["blankAns"])
    assert len(answers) > 2  # the count really varies


def test_choice_answers_are_spread_out(mixed: Path) -> None:
    """Gold options must not sit at a fixed position, or a constant guess would score well."""
    records = _records(mixed)
    for subtype in ("Connect the lines", "Logic Patterns", "Find the same", "Rotation Patterns"):
        golds = [r["choiceAns"] for r in records if r["subtype"] == subtype]
        assert len(set(golds)) >= 3, (subtype, golds)
