"""bv report's cost: each input's rows summed (rollout and LLM judge), the same in any order, rows of
unknown cost counted apart and never taken as free; in JSON, the table and HTML, with a total over
several inputs."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from support.commands import bv_inproc

from bv.core.stats import dollars
from bv.reporting.report import summarize


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """Eight real judged rows (the chance baseline, judged by the rules)."""
    folder = tmp_path_factory.mktemp("cost-report")
    made = bv_inproc(
        f"bv synth --n 8 --seed 1 --out {folder}/data && bv prompt {folder}/data/meta_data.jsonl"
        " | bv rollout --backend chance --quiet --no-cache | bv judge --mode rules --quiet"
    )
    assert made.returncode == 0, made.stderr
    return [json.loads(line) for line in made.stdout.splitlines()]


# Costs whose float sum differs between orders in its last bits.
COSTS = [0.1, 0.2, 0.3, 0.00000007, 1.1, 2.2, 3.3, 0.0425]


def priced(rows, costs, judge=None):
    out = []
    for row, cost in zip(rows, costs, strict=True):
        source = "prices.json: m" if cost is not None else "unknown: x"
        row = {**row, "cost_usd": cost, "price_source": source}
        if judge is not None:
            row["judge_cost_usd"], row["judge_price_source"] = judge, "prices.json: j"
        out.append(row)
    return out


def test_the_cost_is_the_exact_sum_in_any_order(judged):
    rows = priced(judged, COSTS, judge=0.01)
    forward, backward = summarize(rows)["usage"], summarize(rows[::-1])["usage"]
    exact = sum(Decimal(str(c)) for c in COSTS) + Decimal("0.01") * len(COSTS)
    assert forward["cost_usd"] == backward["cost_usd"] == pytest.approx(float(exact), abs=1e-9)
    assert forward["cost_unknown"] == 0


def test_rows_of_unknown_cost_are_counted_apart(judged):
    costs = [0.5, None, 0.25, 0.25, None, 0.5, 0.5, 0.5]
    rows = priced(judged, costs)
    rows[2] = {**rows[2], "judge_cost_usd": None, "judge_price_source": "unknown: no price for model 'j'"}
    rows[3] = {**rows[3], "cost_usd": -4.0}  # not a cost
    usage = summarize(rows)["usage"]
    assert usage["cost_usd"] == 2.0 and usage["cost_unknown"] == 4
    # rows made without prices: no cost at all, not $0
    plain = summarize(judged)["usage"]
    assert plain["cost_usd"] is None and plain["cost_unknown"] == len(judged)


def test_json_table_and_html_show_each_inputs_cost_and_the_total(judged, tmp_path):
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in priced(judged, [0.5] * 8)))
    b = priced(judged, [1.25] * 8)
    b[0] = {**b[0], "cost_usd": None}
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in b))
    data = json.loads(bv_inproc("bv report a.jsonl --format json", cwd=tmp_path).stdout)
    assert data["inputs"][0]["usage"]["cost_usd"] == 4.0
    table = bv_inproc("bv report a.jsonl b.jsonl", cwd=tmp_path)
    assert "a: " in table.stdout and "cost $4.00" in table.stdout
    assert "cost $8.75 (1 row of unknown cost not counted)" in table.stdout
    assert "Total cost of the 2 inputs: $12.75 (1 row of unknown cost not counted)." in table.stdout
    bv_inproc("bv report a.jsonl b.jsonl --html page.html", cwd=tmp_path)
    page = (tmp_path / "page.html").read_text()
    assert "<th>cost (USD)</th><td>$4.00</td><td>$8.75 (1 row of unknown cost not counted)</td>" in page
    assert "Total cost of the 2 inputs: $12.75" in page
    # without prices, no cost line at all
    (tmp_path / "plain.jsonl").write_text("".join(json.dumps(r) + "\n" for r in judged))
    assert "cost" not in bv_inproc("bv report plain.jsonl --html p2.html", cwd=tmp_path).stdout
    assert "cost (USD)" not in (tmp_path / "p2.html").read_text()


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (0, "$0.00"),
        (0.000075, "$0.000075"),  # a cheap run's spend: never "$0.00" beside the limit it reached
        (0.0003, "$0.0003"),
        (0.000375, "$0.00038"),
        (0.021888, "$0.022"),
        (0.0996, "$0.10"),  # rounds up into cents
        (0.2298, "$0.23"),
        (0.9996, "$1.00"),
        (1234.5, "$1,234.50"),
        (5e-324, "under $0.000001"),  # bounded, however small
    ],
)
def test_dollars_reads_as_people_read_money(amount, text):
    assert dollars(amount) == text


def test_a_small_spend_is_shown_beside_the_limit_it_reached():
    """The progress summary and the stop line name the spend in significant digits."""
    from bv.engine.progress import Stats

    stats = Stats()
    stats.priced, stats.spent_usd, stats.cost_limit = True, 0.000375, 0.0003
    assert stats.spend_text().startswith("$0.00038 spent of $0.0003 at most")
