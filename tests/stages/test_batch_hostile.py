"""Batch mode against a hostile loopback files/batches server (tests/support/fakebatch.py), as users type
the commands (issue 34): a server that names a dearer model than the one asked for cannot make
`--batch --max-cost` overspend; a batch the server 404s on but still lists is collected, never
created again; the cost limit's stop message says what was spent when the run ended. Every
expected cost is worked out here from the rates, apart from bv.engine.prices."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.commands import bv_inproc, jsonl
from support.fakebatch import FakeBatch, batch_server, quick_batch_polls  # noqa: F401 (fixtures)
from support.fakeopenai import Reply, completion_body

PROMPT, COMPLETION = 1000, 500  # what every reply of the server below uses
CHEAP = {"input": 0.0, "output": 1.0}  # gpt-4o's batch rates: $0.0005 a reply, $0.001 worst case
DEAR = {"input": 0.0, "output": 100.0}  # gpt-4o-dear's: $0.05 a reply, $0.10 worst case


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    rates = {"input": 2.0, "output": 8.0}
    table = {"gpt-4o": {**rates, "batch": CHEAP}, "gpt-4o-dear": {**rates, "batch": DEAR}}
    path.write_text(json.dumps(table))
    return path


def naming(batches: FakeBatch, model: str) -> None:
    """Every reply names `model`, whatever the request asked for."""
    batches.responder = lambda line: Reply(body=completion_body(Reply(usage=(PROMPT, COMPLETION)), model))


def rollout(batches: FakeBatch, prompts: Path, cache: Path, *extra: str, model: str = "gpt-4o"):
    result = bv_inproc(
        f"bv rollout -m {model} --base-url {batches.base_url} --api-key sk-test --cache {cache}"
        f" {' '.join(extra)} {prompts}"
    )
    return result.returncode, jsonl(result.stdout), result.stderr


def spent(err: str) -> float:
    """The spend the run's last words say."""
    return float(re.findall(r"\$([0-9.]+) spent", err)[-1])


def test_a_server_naming_a_dearer_model_cannot_overspend_the_limit(batches, prompts, prices, tmp_path):
    """Priced at the model asked for, all 12 requests 'fit' $0.35 ($0.001 each) and their replies,
    priced at the model the server named, cost $0.60. Each now counts at the dearest batch rates
    of the price file ($0.10): 3 are sent and cost $0.15."""
    naming(batches, "gpt-4o-dear")
    cache = tmp_path / "c.sqlite"
    common = f"--batch --prices {prices} --max-tokens 1000"
    status, rows, err = rollout(batches, prompts, cache, common, "--max-cost 0.35")
    assert status == 130, err
    assert batches.creations == 1 and [len(job.lines) for job in batches.jobs.values()] == [3]
    assert [r["cost_usd"] for r in rows] == [pytest.approx(0.05)] * 3
    assert all(r["price_source"] == f"{prices}: gpt-4o-dear (batch)" for r in rows)
    assert sum(r["cost_usd"] for r in rows) <= 0.35
    assert "stopped at the cost limit ($0.15 spent of $0.35; 9 requests not sent" in err
    assert "dearest batch rates of the price file" in err


def test_a_limit_that_cannot_be_bounded_or_priced_sends_nothing(batches, prompts, prices, tmp_path):
    naming(batches, "gpt-4o-dear")
    common = "--batch --max-tokens 10 --max-cost 100"
    unpriced = f"--prices {prices}"
    status, rows, err = rollout(batches, prompts, tmp_path / "a.sqlite", common, unpriced, model="nope")
    assert status == 2 and rows == [] and batches.seen == []  # a model the price file lacks
    assert "--max-cost cannot be kept for model 'nope'" in err and "no price for model 'nope'" in err
    pytest.importorskip("genai_prices")
    status, rows, err = rollout(batches, prompts, tmp_path / "b.sqlite", common, "--prices genai-prices")
    assert status == 2 and rows == [] and batches.seen == []  # any model it prices may be named
    assert "--max-cost with --batch cannot be kept for model 'gpt-4o': its worst case is not bounded" in err


def test_a_batch_the_server_404s_on_but_lists_is_collected_not_created_again(batches, prompts, tmp_path):
    """Issue 34: a batch the server answers 404 for but still lists was sent anew on every re-run
    (3 runs, 3 paid batches). It is found in the list and collected from there; one the server
    neither knows nor lists is said to be lost before its requests are sent again."""
    import time

    from bv.engine.batch_api import EXPIRY_GRACE_S

    cache = tmp_path / "c.sqlite"
    batches.hold.set()  # the first run leaves its batch recorded (still running past its expiry)
    batches.expires_in = -EXPIRY_GRACE_S - 60
    status, rows, err = rollout(batches, prompts, cache, "--batch")
    assert status == 1 and all("past its expires_at" in r["error"] for r in rows), err
    (job,) = batches.jobs.values()
    job.info["expires_at"] = time.time() + 86400
    batches.hold.clear()
    batches.expires_in = 86400
    batches.unknown_by_id = True  # from now on: 404 by its id, though it runs and is listed
    for _ in range(3):
        status, rows, err = rollout(batches, prompts, cache, "--batch")
        assert status == 0 and [r["turns"][0]["content"] for r in rows] == ["\\boxed{A}"] * 12, err
        assert batches.creations == 1
    # a new batch polled by its id (404 each time) is followed through the list too
    status, rows, err = rollout(batches, prompts, tmp_path / "d.sqlite", "--batch")
    assert status == 0 and len(rows) == 12 and batches.creations == 2, err
    # a batch gone from the server altogether is lost: said, then sent anew
    batches.hold.set()
    batches.expires_in = -EXPIRY_GRACE_S - 60
    rollout(batches, prompts, tmp_path / "e.sqlite", "--batch")
    batches.expires_in = 86400
    lost = max(batches.jobs)
    del batches.jobs[lost]
    batches.hold.clear()
    status, rows, err = rollout(batches, prompts, tmp_path / "e.sqlite", "--batch")
    assert status == 0 and len(rows) == 12 and batches.creations == 4, err
    assert f"the recorded batch {lost} is lost: the server neither knows its id nor lists it" in err
