"""bv.api's typed keywords (bv/api/keywords.py, written by bv/api/keyword_types.py): the declared
settings, each with its type, so that help(), IDEs and mypy see them."""

from __future__ import annotations

import os
import subprocess
import sys
import typing

from support.paths import ROOT

from bv.api import keywords
from bv.api.keyword_types import _DICTS, source
from bv.api.stages import api_keywords


def test_the_typed_keywords_are_the_declared_settings():
    """`**settings: Any` was invisible to help(), IDEs and mypy (issue 44); written again from the
    declarations, the file is unchanged, so a setting added or retyped cannot be forgotten."""
    import importlib

    assert (ROOT / "bv" / "api" / "keywords.py").read_text() == source(), (
        "run: python -m bv.api.keyword_types > bv/api/keywords.py"
    )
    for name, module, config, positional, required in _DICTS:
        typed = getattr(keywords, name)
        declared = [
            k for k in api_keywords(getattr(importlib.import_module(module), config)) if k not in positional
        ]
        assert list(typed.__annotations__) == declared
        assert typed.__required_keys__ == frozenset(required)
    assert typing.get_type_hints(keywords.RolloutKeywords)["repeats"] is int


def test_mypy_reports_a_misspelt_keyword_in_a_user_script(tmp_path):
    script = tmp_path / "study.py"
    script.write_text(
        "import bv.api\n\n"
        'bv.api.evaluate("items.jsonl", "runs/x", temperature=0.5, backend="chance")\n'
        'bv.api.evaluate("items.jsonl", "runs/x", temprature=0.5)\n'
        'bv.api.rollout([], repeats="3")\n'
    )
    options = ["--config-file", os.devnull, "--follow-imports=silent", "--cache-dir", str(tmp_path / "c")]
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", *options, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "MYPYPATH": str(ROOT)},
    )
    assert 'study.py:4: error: Unexpected keyword argument "temprature" for "evaluate"' in checked.stdout
    assert 'study.py:5: error: Argument "repeats" to "rollout" has incompatible type "str"' in checked.stdout
    assert "study.py:3" not in checked.stdout and checked.returncode == 1
