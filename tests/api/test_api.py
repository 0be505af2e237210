"""bv as a library (docs/api.md): the documented snippet runs, and api.rollout keeps the
command's guarantees (retries, failed rows recorded, the cache that makes a re-run resume,
order), in-process against the loopback server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.fakeopenai import Reply
from support.paths import ROOT

from bv import api
from bv.core.errors import BadRecord, BVError, Interrupted


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
    assert "95% CI" in out and "no significant difference" in out and "v1" in out.splitlines()[0] + out


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


def test_inside_a_running_loop_the_plain_call_and_the_async_variant_both_run(sample_dir):
    """A Jupyter cell runs in an event loop: the plain call runs there as in a script (issue 44)."""
    prompts = _prompts(sample_dir, 3)

    async def main():
        plain = api.judge(api.rollout(prompts, backend="chance", seed=1, cache=None), mode="rules")
        awaited = await api.arollout(prompts, backend="chance", repeats=2)
        return plain, awaited

    plain, rows = asyncio.run(main())
    assert [r["id"] for r in plain] == [p["id"] for p in prompts] and all("hard" in r for r in plain)
    assert [(r["id"], r["run"]) for r in rows] == [(p["id"], k) for p in prompts for k in (0, 1)]
    assert api.report(api.judge(rows, mode="rules")).summaries[0]["overall"]["rows"] == 6


def test_importing_the_api_is_cheap():
    """The stages, HTTP clients and Pillow load when a function is called, not on import."""
    code = "import sys, bv.api; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ).stdout
    loaded = set(out.split())
    assert {m for m in loaded if m.startswith("bv")} <= {
        "bv",
        "bv.api",
        "bv.api.workflows",  # the api's own modules (bv/api/), which import the rest when called
        "bv.api.stages",
        "bv.api.inputs",  # what the functions take (a file, a run folder, records): no stage
        "bv.core",
        "bv.core.errors",
        "bv.core.records",
        "bv.core.settings",  # the settings' declarations (no click), and their defaults
        "bv.engine",
        "bv.engine.defaults",
        "bv.stages",
        "bv.stages.request_settings",
        "bv.reporting",
        "bv.reporting.report_view",  # bv.api.Report: a dataclass, its renderers loaded when called
        "bv.reporting.runs_view",  # bv.api.RunsTable: the same for a table of runs
    }
    assert not loaded & {"asyncio", "aiohttp", "openai", "PIL", "rich", "click", "jsonlines"}
    assert callable(api.rollout) and api.Report.__name__ == "Report"


def test_backend_configuration_refuses_unknown_keys_and_passes_keep_workdirs(tmp_path):
    from bv.engine.backends import make_backend
    from bv.engine.backends.plugins import BUILT_IN, backend_class
    from bv.stages.request_params import RequestParams
    from bv.stages.rollout_config import RolloutConfig, backend_settings

    assert [backend_class(name).name for name in BUILT_IN] == list(BUILT_IN)  # each class says its name
    assert backend_settings("chance") == () and "exec_cmd" in backend_settings("exec")
    with pytest.raises(ValueError, match="takes no keep_workdirs"):
        make_backend("chance", seed=1, keep_workdirs="x")
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        RolloutConfig(backend="nope")
    config = RolloutConfig(backend="exec", exec_cmd="true {prompt}", keep_workdirs=str(tmp_path / "keep"))
    assert make_backend("exec", **config.backend_config).keep_dir == tmp_path / "keep"
    chance = RolloutConfig(backend="chance", request=RequestParams(seed=3))
    assert make_backend("chance", **chance.backend_config).seed == 3


def test_judge_endpoint_built_once_from_options_and_environment():
    from bv.engine.endpoints import judge_endpoint

    endpoint = judge_endpoint(
        "auto", "jm", "http://127.0.0.1:9/v1", None, env={"BV_JUDGE_API_KEY": "sk-judge"}
    )
    assert endpoint is not None and endpoint.api_key == "sk-judge" and endpoint.role == "judge"
    assert judge_endpoint("rules", "jm", None, None, env={}) is None  # no endpoint needed
    assert judge_endpoint("llm", None, None, None, env={}) is None  # JudgeConfig then says a model is needed


def test_one_module_reads_the_environment():
    """bv.core.environment reads every variable (bv.engine.endpoints gets the endpoint ones from it), so a
    caller from Python can see in one place what outside settings a run depends on."""
    readers = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "bv").rglob("*.py"))
        if re.search(r"os\.environ|os\.getenv|getenv\(", path.read_text())
    ]
    assert readers == ["bv/core/environment.py"]


def test_report_json_has_one_shape_whatever_the_number_of_inputs(sample_dir):
    import io

    from bv.reporting.render import render_json
    from bv.reporting.report import build_report

    rows = api.judge(api.rollout(_prompts(sample_dir, 3), backend="chance"), mode="rules")
    shapes = []
    for inputs in ([("a", rows)], [("a", rows), ("b", rows)], [("a", rows), ("b", rows), ("c", rows)]):
        out = io.StringIO()
        render_json(build_report(inputs)[0], out)
        report = json.loads(out.getvalue())
        shapes.append(sorted(report))
        assert [s["name"] for s in report["inputs"]] == [name for name, _ in inputs]
        assert (report["comparison"] is None) == (len(inputs) == 1)
    assert shapes == [["comparison", "inputs", "power"]] * 3
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


def _cancelled_after(run, ready) -> float:
    """Await `run` in a fresh event loop, cancel it once `ready()`, and return the seconds from the
    cancellation until the loop is closed (asyncio.run waits for its threads): the await must
    raise CancelledError, and no thread the run started may be left (bv's reader polls its stop
    every 0.25 s)."""
    before = set(threading.enumerate())
    cancelled_at = 0.0

    async def main() -> None:
        nonlocal cancelled_at
        task = asyncio.ensure_future(run)
        while not ready():
            await asyncio.sleep(0.01)
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    elapsed = time.monotonic() - cancelled_at
    time.sleep(0.3)
    assert set(threading.enumerate()) <= before
    return elapsed


def test_cancelling_arollout_stops_promptly_and_keeps_every_paid_reply(tmp_path, sample_dir, server):
    """The awaiting task cancelled mid-run: the await raises promptly, what was in flight finished
    and is cached, nothing is left running, and the same call resumes from the cache."""
    server.latency = 0.1
    prompts = _prompts(sample_dir, 12)
    options = dict(model="m", base_url=server.base_url, api_key="k", cache=tmp_path / "c.db", jobs=4)
    total = 12 * 5  # 5 runs each: 1.5 s of requests at 4 at a time
    asked = []

    def ready() -> bool:
        asked[:] = [len(server.seen)]
        return len(server.finished()) >= 8

    assert _cancelled_after(api.arollout(prompts, repeats=5, **options), ready) < 1.5
    answered = len(server.finished())
    assert len(server.seen) == answered, "a request was abandoned in flight"
    assert asked[0] <= answered < total  # those in flight when cancelled finished too
    assert all(s.status == 200 for s in server.seen)
    sent = len(server.seen)
    rows = api.rollout(prompts, repeats=5, **{**options, "jobs": 32})
    assert len(server.seen) - sent == total - answered  # every reply the server sent is cached
    assert sum(r["turns"][0]["cached"] for r in rows) == answered
    assert [(r["id"], r["run"]) for r in rows] == [(p["id"], k) for p in prompts for k in range(5)]
    assert not any(r["error"] for r in rows)


def test_a_wait_for_timeout_stops_arollout_the_same_way(tmp_path, sample_dir, server):
    server.latency = 0.1
    prompts = _prompts(sample_dir, 12)
    options = dict(model="m", base_url=server.base_url, api_key="k", cache=tmp_path / "c.db", jobs=4)
    before = set(threading.enumerate())

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(api.arollout(prompts, repeats=5, **options), timeout=0.5)

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 1.5
    time.sleep(0.3)
    assert set(threading.enumerate()) <= before
    answered = len(server.finished())
    assert len(server.seen) == answered < 60
    rows = api.rollout(prompts, repeats=5, **{**options, "jobs": 32})
    assert len(server.seen) - answered == 60 - answered
    assert sum(r["turns"][0]["cached"] for r in rows) == answered


def test_cancelling_ajudge_keeps_the_llm_verdicts_it_paid_for(tmp_path, sample_dir, server):
    server.latency = 0.1
    server.responder = lambda seen: Reply(content="True")
    rolled = api.rollout(_prompts(sample_dir, 12), backend="chance", repeats=4)
    rows = [{**row, "response": f"\\boxed{{{n}}}"} for n, row in enumerate(rolled)]  # one question each
    options = dict(mode="llm", judge_model="j", judge_base_url=server.base_url, judge_api_key="k", jobs=4)
    options["cache"] = tmp_path / "c.db"

    assert _cancelled_after(api.ajudge(rows, **options), lambda: len(server.finished()) >= 6) < 1.5
    answered = len(server.finished())
    assert len(server.seen) == answered < len(rows)
    judged = api.judge(rows, **{**options, "jobs": 32})
    assert len(server.seen) - answered == len(rows) - answered
    assert all(r["decided_by"] == "llm" and r["hard"] == 1 for r in judged)


def test_cancelling_ajudge_by_rules_stops_reading_its_rows(sample_dir):
    rolled = api.rollout(_prompts(sample_dir, 12), backend="chance")
    rows = [{**row, "run": run} for run in range(4000) for row in rolled]  # 48000 rows
    started = time.monotonic()
    stopping = _cancelled_after(api.ajudge(rows, mode="rules"), lambda: time.monotonic() > started + 0.1)
    started = time.monotonic()
    api.judge(rows, mode="rules")  # the whole run, for the measure: stopping must take a fraction of it
    assert stopping < (time.monotonic() - started) / 4


def test_ctrl_c_stops_rollout_which_raises_after_caching_what_finished(tmp_path, sample_dir, server):
    """bv's Interrupted (never KeyboardInterrupt), as the command stops on Ctrl-C: requests in
    flight finish and are cached, then api.rollout raises; the same call resumes from the cache."""
    server.latency = 0.1
    prompts = _prompts(sample_dir, 12)
    options = dict(model="m", base_url=server.base_url, api_key="k", cache=tmp_path / "c.db", jobs=4)
    missed = []  # a SIGINT that came while no run was there to take it (the test would be void)
    previous = signal.signal(signal.SIGINT, lambda *_: missed.append(1))

    over = threading.Event()

    def interrupt() -> None:
        while len(server.finished()) < 8:
            if over.wait(0.01):
                return
        os.kill(os.getpid(), signal.SIGINT)

    interrupter = threading.Thread(target=interrupt)
    interrupter.start()
    try:
        with pytest.raises(Interrupted, match="call again to resume") as raised:
            api.rollout(prompts, repeats=5, **options)
        assert raised.value.signal == signal.SIGINT and isinstance(raised.value, BVError)
    finally:
        over.set()
        interrupter.join()
        signal.signal(signal.SIGINT, previous)
    assert not missed
    answered = len(server.finished())
    assert len(server.seen) == answered < 60
    rows = api.rollout(prompts, repeats=5, **{**options, "jobs": 32})
    assert len(server.seen) - answered == 60 - answered
    assert sum(r["turns"][0]["cached"] for r in rows) == answered


def _cli(*args: str) -> str:
    """What a bv command prints on stdout, run in-process."""
    from click.testing import CliRunner

    from bv.cli.app import cli

    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _write(path: Path, rows: list) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_report_render_prints_what_bv_report_prints(tmp_path, sample_dir):
    prompts = _prompts(sample_dir, 6)
    a = api.judge(api.rollout(prompts, backend="chance", repeats=2, seed=1), mode="rules")
    b = api.judge(api.rollout(prompts[1:], backend="chance", repeats=2, seed=2), mode="rules")
    paths = [_write(tmp_path / "a.jsonl", a), _write(tmp_path / "b.jsonl", b)]
    for files, report in (([paths[0]], api.report({"a": a})), (paths, api.report({"a": a, "b": b}))):
        for fmt in ("table", "markdown", "csv", "json"):
            assert report.render(fmt) == _cli("report", *files, "--format", fmt), (fmt, len(files))
        assert report.data == json.loads(report.render("json"))
    assert report.paired is not None and report.paired["a"] == "a" and report.paired["b"] == "b"
    assert report.data["comparison"] is not None and report.data["comparison"]["left_out"] == {"a": 2, "b": 0}


def test_merge_returns_the_rows_bv_merge_writes(tmp_path, sample_dir):
    prompts = _prompts(sample_dir, 4)
    first = api.judge(api.rollout(prompts, backend="chance", repeats=2, seed=1), mode="rules")
    redone = api.judge(api.rollout(prompts[2:], backend="chance", repeats=3, seed=2), mode="rules")
    shards = [_write(tmp_path / "first.jsonl", first), _write(tmp_path / "redone.jsonl", redone)]
    _cli("merge", *shards, "--sort", "-o", str(tmp_path / "merged.jsonl"))
    written = [json.loads(line) for line in (tmp_path / "merged.jsonl").read_text().splitlines()]
    assert api.merge(first, redone, sort=True) == written
    assert [(r["id"], r["run"]) for r in written] == sorted(
        {(r["id"], r["run"]) for r in first + redone}, key=lambda key: (int(key[0]), key[1])
    )
    assert all(r in redone for r in written if r["id"] in {p["id"] for p in prompts[2:]})


def test_report_takes_a_results_file_by_its_path(tmp_path, sample_dir):
    """api.report("x.jsonl") reads the file as bv report does (it raised "dictionary update
    sequence..." before); a bad line names the file and line."""
    from bv.core.errors import BadRecord

    rows = api.judge(api.rollout(_prompts(sample_dir), backend="chance", cache=None), mode="rules")
    path = tmp_path / "v1.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    by_path, by_rows = api.report(str(path)), api.report({"v1": rows})
    assert by_path.data == by_rows.data and api.report(path).data == by_rows.data
    assert api.report({"v1": path}).data == by_rows.data
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(BadRecord, match=r"v1.jsonl:5"):
        api.report(path)


def test_optimize_takes_the_ratio_as_the_command_line_writes_it(tmp_path, sample_dir):
    """api.optimize(ratio="2:3:3") (an "unsupported operand" before), as --ratio 2:3:3."""
    from bv.optimize.results import OptimizeError

    skill = tmp_path / "seed.md"
    skill.write_text("Look twice.\n")
    common = {"skill": str(skill), "out": tmp_path / "run", "optimizer_model": "o", "backend": "chance"}
    items = sample_dir / "meta_data.jsonl"
    said = []
    for ratio in ("1:1:1", (1, 1, 1)):  # 12 items split 1:1:1 by subtype: a part left empty, alike
        with pytest.raises(OptimizeError, match="leaves a part empty") as raised:
            api.plan_optimize(items, ratio=ratio, **common)
        said.append(str(raised.value))
    assert said[0] == said[1]
    with pytest.raises(OptimizeError, match="`ratio`"):
        api.plan_optimize(items, ratio="2:x:3", **common)


def test_evaluate_s_result_carries_its_rows_and_names_a_missing_pandas(tmp_path, sample_dir, monkeypatch):
    """EvalResult.rows() are results.jsonl's judged rows (a count is `row_count`); to_pandas()
    imports pandas only when called, and without it raises a BVError saying what to install."""
    from bv.core.errors import MissingPackage

    out = tmp_path / "run"
    items = sample_dir / "meta_data.jsonl"
    result = api.evaluate(
        str(items), str(out), backend="chance", mode="rules", repeats=2, limit=3, cache=None
    )
    rows = list(result.rows())
    written = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows == written and len(rows) == result.row_count == 6
    assert {(r["id"], r["run"]) for r in rows} == {(r["id"], r["run"]) for r in written}
    monkeypatch.setitem(sys.modules, "pandas", None)  # as where pandas is not installed
    with pytest.raises(MissingPackage, match="pip install pandas") as raised:
        result.to_pandas()
    assert isinstance(raised.value, BVError)
    monkeypatch.undo()
    import importlib.util

    if importlib.util.find_spec("pandas") is not None:  # pandas is no dependency of bv's
        frame = result.to_pandas()
        assert len(frame) == 6 and list(frame["correct"]) == [r["hard"] == 1 for r in rows]
        assert "hard" not in frame.columns and set(frame["name"]) == {"run"}


def test_evaluate_raises_a_fatal_cause_and_a_stopped_run_has_no_rows(tmp_path, sample_dir):
    """A run nothing can answer raises bv.core.errors.Fatal (a BVError), never a status to check."""
    from bv.core.errors import Fatal
    from bv.evaluation.evaluate import EvalResult

    items = sample_dir / "meta_data.jsonl"
    with pytest.raises(Fatal, match="connection refused") as raised:  # a dozen refused: nothing answers
        api.evaluate(
            items,
            tmp_path / "run",
            model="m",
            base_url="http://127.0.0.1:9/v1",
            api_key="k",
            limit=12,
            retries=0,
            cache=None,
            mode="rules",
        )
    assert isinstance(raised.value, BVError)
    assert not (tmp_path / "run" / "results.jsonl").exists()
    assert list(EvalResult(tmp_path / "run").rows()) == []  # no results written: no rows
