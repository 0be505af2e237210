"""Building a study's own items as docs/data.md shows it: its Python block and its shell block
run exactly as the page has them, and the items' tags reach every judged row."""

from __future__ import annotations

import json
import re
import sys

from support.commands import sh
from support.paths import ROOT

SECTION = "## Building a study's items"


def _blocks() -> tuple[str, list[str]]:
    page = (ROOT / "docs" / "data.md").read_text()
    section = page[page.index(SECTION) :].split("\n## ", 1)[0]
    python = re.search(r"```python\n(.*?)```", section, re.S)
    shell = re.search(r"```sh\n(.*?)```", section, re.S)
    assert python and shell, "docs/data.md's study section has a python and a sh block"
    return python.group(1), [line for line in shell.group(1).splitlines() if line.strip()]


def test_the_study_items_page_runs_as_written(tmp_path):
    script, lines = _blocks()
    (tmp_path / "make_items.py").write_text(script)
    for line in lines:
        command = line.replace("python ", f"{sys.executable} ", 1) if line.startswith("python ") else line
        done = sh(command, cwd=tmp_path)
        if line.startswith("grep -c"):
            assert done.stdout.strip() == "24", line
        assert done.returncode == 0, (line, done.stderr)
        assert "Traceback" not in done.stderr, line
    items = [json.loads(line) for line in (tmp_path / "study/meta_data.jsonl").read_text().splitlines()]
    assert len(items) == 24 and {item["subtype"] for item in items} == {"few dots", "many dots"}
    assert len((tmp_path / "some.jsonl").read_text().splitlines()) == 4
    rows = [
        json.loads(line) for line in (tmp_path / "runs/dots-chance/results.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 24 and all(row["study"] == "dots-v1" and row["source"] == "drawn" for row in rows)
    report = sh("bv report runs/dots-chance", cwd=tmp_path).stdout
    assert "few dots" in report and "many dots" in report
