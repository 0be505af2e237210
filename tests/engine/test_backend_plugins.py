"""A backend from a package of its own: docs/backends.md's plugin, its code and entry point taken
from the page, built into a wheel and installed with bv's wheel in a fresh venv outside the checkout
(support/installing.py), and run as a user types it. A second entry point of the same package
fails to import, a third is no backend: bv names each, and shows no traceback."""

from __future__ import annotations

import re

import pytest
from support.commands import jsonl
from support.installing import Dist, Installed, build, install
from support.paths import ROOT

PAGE = (ROOT / "docs" / "backends.md").read_text()
PLUGIN = re.search(r"```python\n# bv_echo\.py\n(.*?)```", PAGE, re.S)
ENTRY_POINTS = re.search(r"```toml\n# pyproject\.toml[^\n]*\n(.*?)```", PAGE, re.S)
PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "bv-echo"
version = "0.1"

[tool.setuptools]
py-modules = ["bv_echo", "bv_broken"]

"""


@pytest.fixture(scope="module")
def plugged(bv_dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    assert PLUGIN and ENTRY_POINTS, "docs/backends.md lost its plugin example"
    source = tmp_path_factory.mktemp("bv-echo")
    (source / "bv_echo.py").write_text(PLUGIN[1])
    (source / "bv_broken.py").write_text("raise ImportError('the broken plugin needs torch')\n")
    broken = 'broken = "bv_broken:BrokenBackend"\nhalf = "bv_echo:Reply"\n'  # Reply: not a backend
    (source / "pyproject.toml").write_text(PYPROJECT + ENTRY_POINTS[1] + broken)
    wheel = build("build_wheel", source, tmp_path_factory.mktemp("plugin-dist"))
    installed = install(
        [bv_dist.wheel, wheel], tmp_path_factory.mktemp("venv"), tmp_path_factory.mktemp("home")
    )
    installed.ok("bv synth --n 6 --seed 1 --out data")
    return installed


def test_an_installed_plugin_backend_runs_a_rollout(plugged):
    command = "bv prompt data/meta_data.jsonl | bv rollout --backend echo -m echo-1"
    rows = jsonl(plugged.ok(command).stdout)
    assert len(rows) == 6
    assert {(r["backend"], r["model"], r["endpoint"], r["error"]) for r in rows} == {
        ("echo", "echo-1", "echo", None)
    }
    assert all(r["response"] == "\\boxed{A}" and not r["cached"] for r in rows)
    again = jsonl(plugged.ok(command).stdout)  # a plugin's replies are cached as bv's own are
    assert all(r["cached"] for r in again)
    judged = jsonl(plugged.ok(f"{command} | bv judge --mode rules").stdout)
    assert len(judged) == 6 and all(r["decided_by"] == "rules" for r in judged)


def test_a_plugin_backend_refuses_a_setting_it_does_not_use(plugged):
    done = plugged.sh("bv prompt data/meta_data.jsonl | bv rollout --backend echo --exec-cmd 'x {prompt}'")
    assert done.returncode == 2 and "the echo backend does not use --exec-cmd" in done.stderr


def test_a_plugin_that_fails_to_import_is_named_without_a_traceback(plugged):
    done = plugged.sh("bv prompt data/meta_data.jsonl | bv rollout --backend broken")
    assert done.returncode == 2 and done.stdout == ""
    assert (
        "backend plugin 'broken' (bv_broken:BrokenBackend, from bv-echo 0.1) failed to import" in done.stderr
    )
    assert "ImportError: the broken plugin needs torch" in done.stderr and "Traceback" not in done.stderr
    done = plugged.sh("bv prompt data/meta_data.jsonl | bv rollout --backend half")
    assert (
        done.returncode == 2
        and "backend plugin 'half' (bv_echo:Reply, from bv-echo 0.1) lacks name" in done.stderr
    )


def test_an_unknown_backend_lists_the_installed_plugins(plugged):
    done = plugged.sh("bv prompt data/meta_data.jsonl | bv rollout --backend nope")
    assert done.returncode == 2
    assert "unknown backend 'nope'; known: openai, azure, exec, chance, broken, echo, half" in done.stderr


def test_bv_eval_runs_a_plugin_backend(plugged):
    plugged.ok("bv eval data/meta_data.jsonl --backend echo -m echo-1 --mode rules -o run")
    rows = jsonl((plugged.home / "run" / "results.jsonl").read_text())
    assert len(rows) == 6 and {(r["backend"], r["model"]) for r in rows} == {("echo", "echo-1")}
