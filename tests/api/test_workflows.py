"""bv.api.evaluate and optimize (bv/api/workflows.py) where researchers call them: inside a
running event loop (a Jupyter cell, an async app) as in a script, and awaited."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
from pathlib import Path

from support.optimizing import Models
from support.paths import ROOT

import bv.api
from bv import api


def test_evaluate_runs_inside_a_running_event_loop_and_aevaluate_awaits_it(sample_dir, tmp_path):
    """A notebook cell runs in an event loop: `api.evaluate` there refused before (issue 44)."""
    items = sample_dir / "meta_data.jsonl"
    options = dict(backend="chance", mode="rules", cache=None, limit=4)

    async def cell():
        plain = api.evaluate(items, tmp_path / "plain", **options)
        awaited = await api.aevaluate(str(items), str(tmp_path / "awaited"), **options)
        return plain, awaited

    plain, awaited = asyncio.run(cell())
    assert plain.status == awaited.status == 0
    assert plain.row_count == awaited.row_count == 4
    assert (tmp_path / "awaited" / "results.jsonl").is_file()


def test_optimize_runs_inside_a_running_event_loop_and_aoptimize_awaits_it(data_dir, tmp_path):
    """`api.optimize` refused inside a loop, and `aoptimize` did not exist (issue 44)."""
    models = Models(data_dir)
    options = dict(
        skill=data_dir / "seed.md",
        model="target",
        base_url=models.target.base_url,
        api_key="sk-test-target",
        optimizer_model="writer",
        optimizer_base_url=models.optimizer.base_url,
        optimizer_api_key="sk-test-optimizer",
        mode="rules",
        ratio="2:3:3",
        batch_size=8,
        minibatch=8,
        edits=2,
        epochs=1,
        cache=tmp_path / "cache.sqlite",
    )

    async def cell():
        plain = api.optimize(data_dir / "meta_data.jsonl", out=tmp_path / "plain", **options)
        awaited = await api.aoptimize(
            str(data_dir / "meta_data.jsonl"), out=str(tmp_path / "awaited"), **options
        )
        return plain, awaited

    try:
        plain, awaited = asyncio.run(cell())
    finally:
        models.stop()
    assert plain.best_skill.text == awaited.best_skill.text
    assert [step["kind"] for step in plain.history] == [step["kind"] for step in awaited.history]
    assert (tmp_path / "awaited" / "best.md").is_file()


def _suggested_names() -> set[str]:
    """Every `bv.api.NAME` (and `api.NAME(`) that bv's messages and docstrings, and docs/api.md, name."""
    texts = [path.read_text() for path in (ROOT / "bv").rglob("*.py")]
    texts.append((ROOT / "docs" / "api.md").read_text())
    names: set[str] = set()
    for text in texts:
        names |= set(re.findall(r"\bbv\.api\.([a-z_][a-z0-9_]*)", text))
        names |= set(re.findall(r"(?<![.\w])api\.([a-z_][a-z0-9_]*)\(", text))
    return names


def test_every_function_a_message_names_exists():
    """A message said `await bv.api.aevaluate(...)`, which did not exist (issue 44)."""
    names = _suggested_names()
    assert {"aevaluate", "aoptimize", "arollout", "ajudge", "evaluate"} <= names | set(bv.api.__all__)
    missing = sorted(
        name
        for name in names
        if not hasattr(bv.api, name) and importlib.util.find_spec(f"bv.api.{name}") is None
    )
    assert not missing, f"named but not in bv.api: {missing}"


def test_the_async_variants_are_exported():
    for name in ("arollout", "ajudge", "aevaluate", "aoptimize"):
        assert name in bv.api.__all__ and asyncio.iscoroutinefunction(getattr(bv.api, name))
    assert json.dumps(sorted(bv.api.__all__)) and Path(bv.api.__file__).is_file()
