"""bv as a library (docs/api.md): the documented snippet runs, and api.rollout keeps the
command's guarantees (retries, failed rows recorded, the cache that makes a re-run resume,
order), in-process against the loopback server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakeopenai import Reply

from bv import api
from bv.errors import BadRecord

ROOT = Path(__file__).resolve().parents[1]


def test_the_documented_skill_comparison_runs(tmp_path, sample_dir, monkeypatch, capsys):
    snippet = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S).group(1)
    (tmp_path / "data").symlink_to(sample_dir)
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "v1.md").write_text("Look twice.")
    (tmp_path / "skills" / "v2.md").write_text("Count carefully.")
    monkeypatch.chdir(tmp_path)
    assert len(snippet.strip().splitlines()) <= 22
    exec(compile(snippet, "docs/api.md", "exec"), {})
    out = capsys.readouterr().out
    accuracy = json.loads(re.search(r"^\{.*\}$", out, re.M).group(0).replace("'", '"'))
    assert set(accuracy) == {"v1", "v2"} and all(0 <= a <= 1 for a in accuracy.values())
    assert "McNemar p =" in out and "v1" in out.splitlines()[0] + out


def _prompts(sample_dir: Path, n: int = 4) -> list[dict]:
    items = [json.loads(line) for line in (sample_dir / "meta_data.jsonl").read_text().splitlines()][:n]
    return list(api.prompt(items, image_root=sample_dir))


def test_rollout_retries_records_failures_and_resumes_from_the_cache(tmp_path, sample_dir, server):
    prompts = _prompts(sample_dir)
    failing = prompts[2]["id"]
    tries: dict[str, int] = {}

    def answer(seen):
        text = json.dumps(seen.body)
        item = next(p["id"] for p in prompts if p["question"][:40] in text.replace('\\"', '"'))
        tries[item] = tries.get(item, 0) + 1
        if item == failing:
            return Reply(status=400, content=None)  # refused for good: the row records it
        if tries[item] == 1:
            return Reply(status=429, headers={"Retry-After": "0"})  # then retried
        return Reply(content=f"\\boxed{{{item}}}")

    server.responder = answer
    options = dict(model="m", base_url=server.base_url, api_key="k", cache=tmp_path / "cache.db", jobs=3)
    rows = api.rollout(prompts, repeats=2, **options)
    assert [(r["id"], r["run"]) for r in rows] == [(p["id"], k) for p in prompts for k in (0, 1)]
    assert [r["id"] for r in rows if r["error"]] == [failing, failing]
    assert all(r["response"] == f"\\boxed{{{r['id']}}}" for r in rows if r["id"] != failing)
    sent = len(server.seen)
    again = api.rollout(prompts, repeats=2, **options)  # resume: only the failed rows are asked again
    assert len(server.seen) - sent == 2
    assert [r["response"] for r in again] == [r["response"] for r in rows]
    judged = api.judge(again, mode="rules")
    assert [r["id"] for r in judged] == [r["id"] for r in rows] and all("hard" in r for r in judged)


def test_a_bad_record_is_named_by_its_index(sample_dir):
    prompts = _prompts(sample_dir, 2)
    with pytest.raises(BadRecord, match=r"prompt record 1: .*messages"):
        api.rollout([prompts[0], {"id": "x"}], backend="chance")


def test_inside_a_running_loop_use_the_async_variant(sample_dir):
    prompts = _prompts(sample_dir, 3)

    async def main():
        with pytest.raises(RuntimeError, match=r"await bv\.api\.arollout"):
            api.rollout(prompts, backend="chance")
        return await api.arollout(prompts, backend="chance", repeats=2)

    rows = asyncio.run(main())
    assert [(r["id"], r["run"]) for r in rows] == [(p["id"], k) for p in prompts for k in (0, 1)]
    assert api.report(api.judge(rows, mode="rules")).summaries[0]["overall"]["rows"] == 6


def test_importing_the_api_is_cheap():
    """The stages, HTTP clients and Pillow load when a function is called, not on import."""
    code = "import sys, bv.api; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ).stdout
    loaded = set(out.split())
    assert {m for m in loaded if m.startswith("bv")} <= {"bv", "bv.api", "bv.errors", "bv.records"}
    assert not loaded & {"aiohttp", "openai", "PIL", "rich", "click", "jsonlines"}
    assert callable(api.rollout) and api.Report.__name__ == "Report"


def test_backend_configuration_refuses_unknown_keys_and_passes_keep_workdirs(tmp_path):
    from bv.backends import BACKENDS, backend_config, make_backend
    from bv.cli_requests import BACKEND_NAMES

    assert BACKEND_NAMES == list(BACKENDS)
    with pytest.raises(ValueError, match="takes no keep_workdirs"):
        make_backend("chance", seed=1, keep_workdirs="x")
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        backend_config("nope")
    config = backend_config("exec", exec_cmd="true {prompt}", keep_workdirs=str(tmp_path / "keep"))
    assert make_backend("exec", **config).keep_dir == tmp_path / "keep"
    assert make_backend("chance", **backend_config("chance", seed=3, model="ignored")).seed == 3


def test_judge_endpoint_built_once_from_options_and_environment():
    from bv.endpoints import judge_endpoint

    endpoint = judge_endpoint(
        "auto", "jm", "http://127.0.0.1:9/v1", None, env={"BV_JUDGE_API_KEY": "sk-judge"}
    )
    assert endpoint is not None and endpoint.api_key == "sk-judge" and endpoint.role == "judge"
    assert judge_endpoint("rules", "jm", None, None, env={}) is None  # no endpoint needed
    assert judge_endpoint("llm", None, None, None, env={}) is None  # run_judge then says a model is needed


def test_one_module_reads_the_environment():
    """bv.environment reads every variable (bv.endpoints gets the endpoint ones from it), so a
    caller from Python can see in one place what outside settings a run depends on."""
    readers = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "bv").rglob("*.py"))
        if re.search(r"os\.environ|os\.getenv|getenv\(", path.read_text())
    ]
    assert readers == ["bv/environment.py"]


def test_report_json_has_one_shape_whatever_the_number_of_inputs(sample_dir):
    import io

    from bv.render import render_json
    from bv.report import build_report

    rows = api.judge(api.rollout(_prompts(sample_dir, 3), backend="chance"), mode="rules")
    shapes = []
    for inputs in ([("a", rows)], [("a", rows), ("b", rows)], [("a", rows), ("b", rows), ("c", rows)]):
        out = io.StringIO()
        render_json(build_report(inputs)[0], out)
        report = json.loads(out.getvalue())
        shapes.append(sorted(report))
        assert [s["name"] for s in report["inputs"]] == [name for name, _ in inputs]
        assert (report["comparison"] is None) == (len(inputs) == 1)
    assert shapes == [["comparison", "inputs"]] * 3
    assert api.report(rows).data["comparison"] is None and api.report(rows).paired is None


def test_merge_keeps_one_row_per_id_and_run_the_later_input_winning():
    a = [
        {"id": "item10", "run": 0, "hard": 0, "model": "m"},
        {"id": "item2", "run": 0, "hard": 0, "model": "m"},
    ]
    b = [
        {"id": "item2", "run": 0, "hard": 1, "model": "m2"},
        {"id": "item2", "run": 1, "hard": 1, "model": "m"},
    ]
    with pytest.warns(UserWarning, match="item2 run 0 replaces a row with model 'm'"):
        merged = api.merge(a, b, sort=True)
    assert [(r["id"], r["run"], r["hard"]) for r in merged] == [
        ("item2", 0, 1),
        ("item2", 1, 1),
        ("item10", 0, 0),
    ]
    with pytest.raises(BadRecord, match="input 2: row 0: 'run' must be an integer"):
        api.merge(a, [{"id": "x", "run": "0"}])
