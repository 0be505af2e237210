"""The report's mean latency does not depend on the order of the rows: a merged, sharded or
reordered input is published with the same figure as the whole one."""

from __future__ import annotations

import json

from support.commands import bv_inproc

from bv.reporting.report import summarize

# Eight latencies whose float sum differs in its last bits between the two orders, enough to move
# the mean's third decimal (1.8905000000000003 against 1.8904999999999998).
LATENCIES = [0.727, 4.6695, 0.9728, 0.1349, 2.3544, 2.8683, 0.2527, 3.1444]


def test_mean_latency_is_the_same_in_any_order(tmp_path):
    made = bv_inproc(
        f"bv synth --n 8 --seed 1 --out {tmp_path}/data && bv prompt {tmp_path}/data/meta_data.jsonl"
        f" | bv rollout --backend chance --quiet --no-cache | bv judge --mode rules --quiet"
    )
    assert made.returncode == 0, made.stderr
    rows = [json.loads(line) for line in made.stdout.splitlines()]
    assert len(rows) == len(LATENCIES)
    for row, latency in zip(rows, LATENCIES, strict=True):
        row["latency_s"] = latency
    forward = summarize(rows)["usage"]["latency_s_mean"]
    backward = summarize(list(reversed(rows)))["usage"]["latency_s_mean"]
    assert forward == backward and abs(forward - 1.8905) <= 0.0005 + 1e-9  # the exact mean, to 3 decimals


def test_values_that_are_not_latencies_are_left_out(tmp_path):
    made = bv_inproc(
        f"bv synth --n 3 --seed 1 --out {tmp_path}/data && bv prompt {tmp_path}/data/meta_data.jsonl"
        f" | bv rollout --backend chance --quiet --no-cache | bv judge --mode rules --quiet"
    )
    rows = [json.loads(line) for line in made.stdout.splitlines()]
    for row, latency in zip(rows, [2.0, -1.0, 1e300], strict=True):
        row["latency_s"] = latency
    assert summarize(rows)["usage"]["latency_s_mean"] == 2.0
