"""`bv optimize --max-cost` (issue 22): one budget for every role's spend over the run. Reached (or a
request's estimated worst case no longer fits in what is left), no new request starts, those in
flight finish and are cached, and the run stops as on a first Ctrl-C:
exit 130, a `stopped` row in history.jsonl, an incomplete report, the reason on stderr; the same
command then goes on from the finished steps. `bv.api.optimize(max_cost=)` stops alike. The costs
are worked out here from the servers' own records and the rates, apart from bv.engine.prices."""

from __future__ import annotations

import contextlib
import itertools
import json
import signal
import sqlite3
import time

import pytest
from support.commands import bv_inproc
from support.optimizing import Models, command, finished_steps, start_bv

from bv import api
from bv.core.errors import BadConfig, Interrupted

RATES = {"target": (1.0, 2.0), "writer": (3.0, 4.0)}  # USD per million prompt, completion tokens
TARGET_REPLY = (120 * 1.0 + 12 * 2.0) / 1e6  # tests/support/skillserver.py's usage: 120 + 12 tokens
OPTIMIZER_REPLY = (900 * 3.0 + 80 * 4.0) / 1e6  # 900 + 80
# The seed's 36 selection items x 2 repeats, step 1's 8 train items and its one optimizer request,
# then step 2's train batch: reached at its sixth reply, only if the optimizer's reply counts too.
LIMIT = (72 + 8 + 5.5) * TARGET_REPLY + OPTIMIZER_REPLY
JOBS = 4


@pytest.fixture
def models(data_dir):
    running = Models(data_dir)
    yield running
    running.stop()


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({m: {"input": i, "output": o} for m, (i, o) in RATES.items()}))
    return path


def paid(models: Models) -> list[tuple[float, float, str]]:
    """Every reply the servers finished, in the order they finished: (when, its cost, role)."""
    replies = [(s.finished, TARGET_REPLY, "target") for s in models.target.finished()]
    replies += [(s.finished, OPTIMIZER_REPLY, "optimizer") for s in models.optimizer.finished()]
    return sorted(replies)


def cached(path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute("SELECT count(*) FROM replies").fetchone()[0]


def rows_of(out) -> list[dict]:
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def test_the_budget_covers_every_role_and_stops_within_one_wave(data_dir, models, prices, tmp_path):
    out = tmp_path / "run"
    args = command(data_dir, models, out, f"--steps 3 -j {JOBS} --prices {prices}")
    stopped = bv_inproc(f"bv {args} --max-cost {LIMIT}")
    assert stopped.returncode == 130, stopped.stderr  # as an interrupted run
    replies = paid(models)
    spent = list(itertools.accumulate(cost for _, cost, _ in replies))
    # Each request's estimated worst case is reserved before it goes: the spend stays under the
    # limit, stopping within the wave in flight before it (as before, when replies overshot it)
    assert spent[-1] <= LIMIT and spent[-1] >= LIMIT - (JOBS + 1) * TARGET_REPLY
    assert len(models.target.seen) + len(models.optimizer.seen) == len(replies)  # each one finished
    # the optimizer's spend counted: without it the target's replies were LIMIT - 5.5 of them short
    target = sum(cost for _, cost, role in replies if role == "target")
    assert spent[-1] - target == pytest.approx(OPTIMIZER_REPLY) and target < LIMIT - OPTIMIZER_REPLY
    assert len(models.optimizer.finished()) == 1  # step 2 stopped before its reflection
    assert cached(out.parent / "cache.sqlite") == len(replies)  # every paid reply is cached
    said = stopped.stderr
    assert "bv optimize: stopped at the cost limit" in said
    assert f"of ${LIMIT:g}; the next request could cost" in said
    assert "), in step 2: train" in said
    assert "1 of 3 steps finished; re-run the same command to go on" in said
    rows = rows_of(out)
    assert [r.get("step") for r in rows[:2]] == [0, 1] and rows[2]["kind"] == "stopped"
    assert rows[2]["after_step"] == 1 and rows[2]["why"].startswith("stopped at the cost limit")
    assert rows[2]["spent_usd"] == pytest.approx(spent[-1])  # what bv counted: every paid reply
    report = (out / "report.md").read_text()
    assert "(incomplete)" in report and "INCOMPLETE: stopped at the cost limit" in report
    assert "1 of 3 steps finished" in report and "## Headline" not in report
    assert "INCOMPLETE" in (out / "report.html").read_text()
    assert not (out / "test.json").exists() and not (out / "best.md").exists()

    done = bv_inproc(f"bv {args}")  # the same command, no limit now: it goes on
    assert done.returncode == 0, done.stderr
    assert "1 already finished" in done.stderr
    finished = paid(models)
    assert cached(out.parent / "cache.sqlite") == len(finished)  # no paid reply was asked for twice
    rows = rows_of(out)
    assert [r.get("step") for r in rows if r["kind"] != "stopped"] == [0, 1, 2, 3]
    assert [r["kind"] for r in rows].count("stopped") == 1 and rows[2]["kind"] == "stopped"
    report = (out / "report.md").read_text()
    assert (
        "## Headline" in report and "stopped before its end after step 1: stopped at the cost limit" in report
    )
    assert json.loads((out / "test.json").read_text())["best"]["accuracy"] is not None


def test_the_api_stops_alike_and_the_budget_needs_prices(data_dir, models, prices, tmp_path):
    out = tmp_path / "run"
    keywords = dict(
        skill=data_dir / "seed.md",
        out=out,
        model="target",
        base_url=models.target.base_url,
        api_key="sk-test-target",
        optimizer_model="writer",
        optimizer_base_url=models.optimizer.base_url,
        optimizer_api_key="sk-test-optimizer",
        mode="rules",
        ratio=(2, 3, 3),
        batch_size=8,
        minibatch=8,
        edits=2,
        repeats=2,
        steps=3,
        jobs=JOBS,
        cache=tmp_path / "cache.sqlite",
    )
    with pytest.raises(BadConfig, match="`max_cost` needs `prices`"):
        api.optimize(data_dir / "meta_data.jsonl", **keywords, max_cost=LIMIT)
    assert not models.target.seen and not out.exists()  # refused before any work
    with pytest.raises(
        Interrupted, match=r"^stopped at the cost limit .*, in step 2: train; 1 of 3 steps"
    ) as raised:
        api.optimize(data_dir / "meta_data.jsonl", **keywords, prices=prices, max_cost=LIMIT)
    assert raised.value.signal == 2  # as a first Ctrl-C
    assert [r["kind"] for r in rows_of(out)] == ["seed", "step", "stopped"]
    refused = bv_inproc("bv " + command(data_dir, models, tmp_path / "cli", "--max-cost 1"))
    assert refused.returncode == 2 and "--max-cost needs --prices" in refused.stderr


def test_a_first_ctrl_c_is_recorded_as_the_cost_limit_is(data_dir, tmp_path):
    """SIGINT while step 2's requests are in flight: exit 130, a `stopped` row saying Ctrl-C, an
    incomplete report; the same command then finishes the run."""
    out = tmp_path / "run"
    frozen = {"on": True}
    models = Models(data_dir, hold=lambda: frozen["on"] and finished_steps(out) >= 2)
    try:
        first = start_bv(command(data_dir, models, out, "--steps 3"))
        deadline = time.monotonic() + 60
        while not (finished_steps(out) >= 2 and len(models.target.seen) > len(models.target.finished())):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        first.send_signal(signal.SIGINT)  # the held requests never answer: the grace period ends them
        assert first.wait(60) == 130
        err = first.stderr.read()  # type: ignore[union-attr]
        assert (
            "interrupted by Ctrl-C, in step 2: train; 1 of 3 steps finished; re-run the same command" in err
        )
        rows = rows_of(out)
        assert rows[-1]["kind"] == "stopped" and rows[-1]["after_step"] == 1
        assert rows[-1]["why"] == "interrupted by Ctrl-C, in step 2: train" and rows[-1]["spent_usd"] is None
        assert "INCOMPLETE: interrupted by Ctrl-C" in (out / "report.md").read_text()
        frozen["on"] = False
        again = bv_inproc("bv " + command(data_dir, models, out, "--steps 3"))
        assert again.returncode == 0, again.stderr
        assert [r.get("step") for r in rows_of(out) if r["kind"] != "stopped"] == [0, 1, 2, 3]
    finally:
        models.stop()
