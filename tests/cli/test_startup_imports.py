"""Short commands start fast because they import only what they use: `bv --help` and the report's
text formats load no event loop, HTTP client, image library or SDK; only the table on a terminal
loads rich (in a pipe or a file it is bv's own plain text). Each case runs in a fresh interpreter
(imports are per process) through the entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.terminal import on_terminal

HEAVY = {"asyncio", "aiohttp", "openai", "PIL", "httpx"}

PROBE = """
import json, sys
from bv.cli.app import main
sys.argv = ["bv", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
finally:
    with open(OUT, "w") as f:
        f.write(" ".join(sorted(sys.modules)))
"""


def loaded_by(args: list[str], tmp_path, terminal: bool = False) -> set[str]:
    return {name.split(".")[0] for name in modules_loaded_by(args, tmp_path, terminal)}


def modules_loaded_by(args: list[str], tmp_path, terminal: bool = False) -> set[str]:
    """The modules `bv ARGS` loads, its stdout a pipe (or, `terminal`, a pseudo-terminal)."""
    out = tmp_path / "modules.txt"
    code = PROBE.replace("OUT", repr(str(out)))
    if terminal:
        on_terminal([sys.executable, "-c", code, json.dumps(args)], 100)
    else:
        subprocess.run(
            [sys.executable, "-c", code, json.dumps(args)], capture_output=True, timeout=60, check=False
        )
    return set(out.read_text().split())


@pytest.fixture
def judged(tmp_path, sample_dir):
    from support.commands import bv_inproc

    rows = tmp_path / "rows.jsonl"
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend chance"
        f" | bv judge --mode rules > {rows}"
    )
    assert result.returncode == 0, result.stderr
    return rows


def test_help_loads_nothing_heavy(tmp_path):
    loaded = loaded_by(["--help"], tmp_path)
    assert "bv" in loaded and not loaded & (HEAVY | {"rich"})


def test_help_imports_no_command_and_a_command_only_its_own(tmp_path):
    """The listing comes from bv.cli.app.COMMANDS; `bv report --help` loads the report's module
    and no other command's (tests/cli/test_cli_listing.py holds the listing to the commands' help)."""
    commands = {
        "bv.cli." + module
        for module in (
            "request_commands",
            "result_commands",
            "data_commands",
            "item_commands",
            "cache_commands",
            "template_commands",
            "eval_command",
            "optimize_command",
        )
    }
    assert "bv.cli.app" in modules_loaded_by(["--help"], tmp_path)
    assert not modules_loaded_by(["--help"], tmp_path) & (commands | {"bv.cli.common", "bv.cli.options"})
    assert modules_loaded_by(["report", "--help"], tmp_path) & commands == {"bv.cli.result_commands"}


@pytest.mark.parametrize("format", ["json", "csv", "markdown"])
def test_text_reports_load_no_event_loop_client_or_rich(tmp_path, judged, format):
    loaded = loaded_by(["report", str(judged), "--format", format], tmp_path)
    assert "bv" in loaded and not loaded & (HEAVY | {"rich"})


def test_the_table_loads_rich_on_a_terminal_only(tmp_path, judged):
    piped = loaded_by(["report", str(judged)], tmp_path)
    assert "bv" in piped and not piped & (HEAVY | {"rich"})
    shown = loaded_by(["report", str(judged)], tmp_path, terminal=True)
    assert "rich" in shown and not shown & HEAVY


def test_the_table_starts_without_statistics_or_emoji_codes(tmp_path, judged):
    """What a report of files does not need stays unloaded: `statistics` (the power plans import
    it when they run), `tempfile` (only stdin is spooled), `decimal` (for a cost under $0.10)
    and rich's emoji table, as a `:name:` in a file name is data, shown as written."""
    named = tmp_path / "a:smile:b.jsonl"
    named.write_bytes(judged.read_bytes())
    loaded = modules_loaded_by(["report", str(named)], tmp_path, terminal=True)
    assert "rich.console" in loaded and not loaded & {"statistics", "tempfile", "rich._emoji_codes"}
    status, seen, _ = on_terminal([sys.executable, "-m", "bv", "report", str(named)], 100)
    assert status == 0 and "bv report: a:smile:b" in seen
    piped = modules_loaded_by(["report", str(named)], tmp_path)
    assert not piped & {
        "statistics",
        "tempfile",
        "decimal",
        "rich",
        "bv.engine.progress",
    }  # decimal: sums under $0.10
    shown = subprocess.run(
        [sys.executable, "-m", "bv", "report", str(named)], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0 and "bv report: a:smile:b" in shown.stdout


def test_bv_own_backends_read_no_plugin_metadata(tmp_path, prompts):
    """Installed packages' `bv.backends` entry points are read only for a backend that is not bv's
    own (bv.engine.backends.plugins): reading every package's metadata costs start-up time."""
    for args in (["--help"], ["rollout", "--help"], ["rollout", "--backend", "chance", str(prompts)]):
        assert "importlib.metadata" not in modules_loaded_by(args, tmp_path), args
