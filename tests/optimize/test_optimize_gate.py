"""The gate's false-accept rate, by simulation: a candidate no better than the current skill (the
same per-item accuracy, sampled anew) is accepted by the paired gate at most alpha of the time,
and a whole run of such steps ends with an accepted edit at most alpha of the time (the per-run
guarantee of alpha / 2^j per decision); the reference's "strictly higher" rule far more often.
A real improvement is still found; failed rows are left out and counted, never scored 0. The
direction and the test are checked against Newcombe's interval recomputed on scipy."""

from __future__ import annotations

import math
import random

import scipy.stats as scipy_stats
from support.paired import independent_newcombe

from bv.optimize.gate import decide, finished_scores, step_alpha
from bv.optimize.results import step_line


def sampled(rng: random.Random, accuracy: dict[str, float], repeats: int) -> dict[str, list[float]]:
    return {item: [float(rng.random() < p) for _ in range(repeats)] for item, p in accuracy.items()}


def false_accepts(gate: str, alpha: float, *, items: int, repeats: int, trials: int, seed: int) -> float:
    rng = random.Random(seed)
    accepted = 0
    for _ in range(trials):
        # per-item accuracies like a target's on BabyVision: many items always or never right
        accuracy = {f"{i}": rng.choice([0.0, 0.0, 1.0, rng.random(), rng.random()]) for i in range(items)}
        current, candidate = sampled(rng, accuracy, repeats), sampled(rng, accuracy, repeats)
        accepted += decide(current, candidate, gate, alpha * 2).accepted  # the first decision: alpha
    return accepted / trials


def test_an_identical_candidate_passes_the_paired_gate_at_most_alpha_of_the_time():
    for items, repeats, alpha in [(39, 3, 0.05), (39, 1, 0.05), (60, 2, 0.10)]:
        rate = false_accepts("paired", alpha, items=items, repeats=repeats, trials=600, seed=items + repeats)
        # the binomial noise of 600 trials at rate alpha is about 0.01: three of it above alpha
        assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / 600), (items, repeats, rate)


def test_the_references_rule_accepts_an_identical_candidate_often():
    rate = false_accepts("greater", 0.05, items=39, repeats=3, trials=300, seed=1)
    assert rate > 0.3  # all but the ties: close to half


def test_the_gate_is_one_sided_in_the_candidates_favour():
    # one run per item: 9 items improved, 1 regressed, 30 unchanged
    current = {f"{i}": [0.0] for i in range(9)} | {"r": [1.0]} | {f"u{i}": [1.0] for i in range(30)}
    candidate = {f"{i}": [1.0] for i in range(9)} | {"r": [0.0]} | {f"u{i}": [1.0] for i in range(30)}
    decision = decide(current, candidate, "paired", 0.05)
    p = decision.comparison.p_value  # the exact test's: a binomial test on the 10 items that moved
    assert p == scipy_stats.binomtest(9, 10, 0.5, "greater").pvalue
    assert p < step_alpha(0.05, 1) == 0.025 and decision.accepted and decision.test.startswith("exact")
    backwards = decide(candidate, current, "paired", 0.05)
    assert not backwards.accepted and backwards.comparison.p_value > 0.9
    assert decision.to_json()["improved"] == 9 and decision.to_json()["regressed"] == 1
    # 7 improved and 1 regressed: Newcombe's interval called it significant at 0.025; exactly, p = 9/256
    current7 = {f"{i}": [0.0] for i in range(7)} | {"r": [1.0]} | {f"u{i}": [1.0] for i in range(30)}
    candidate7 = {f"{i}": [1.0] for i in range(7)} | {"r": [0.0]} | {f"u{i}": [1.0] for i in range(30)}
    assert independent_newcombe(30, 7, 1, 0, level=0.95)[0] > 0
    assert decide(current7, candidate7, "paired", 0.05).comparison.p_value == 9 / 256


def run_accepts(
    rng: random.Random, accuracy: dict[str, float], steps: int, alpha: float, lift: float
) -> list[bool]:
    """One run of the loop's gate with bv's own code: the seed's selection scores stored once,
    each step a candidate sampled anew (raised by `lift`), decided at the run's j-th share."""
    current = sampled(rng, accuracy, 3)
    decided: list[bool] = []
    for step in range(1, steps + 1):
        candidate = sampled(rng, {i: min(1.0, p + lift) for i, p in accuracy.items()}, 3)
        decision = decide(current, candidate, "paired", alpha, decision=step)
        decided.append(decision.accepted)
        if decision.accepted:
            current = candidate
    return decided


def test_a_run_whose_edits_cannot_help_accepts_at_most_alpha_of_the_time():
    """8 steps (the defaults), 39 selection items x 3 repeats, 400 seeded runs under the null:
    the share of runs with any accepted edit is at most alpha within its Clopper-Pearson
    interval (a bare per-decision alpha gave 19% here, issue 33)."""
    rng = random.Random(33)
    runs, bad = 400, 0
    for _ in range(runs):
        accuracy = {f"{i}": rng.choice([0.0, 1.0, rng.betavariate(2, 2), rng.random()]) for i in range(39)}
        bad += any(run_accepts(rng, accuracy, 8, 0.05, 0.0))
    low = scipy_stats.binomtest(bad, runs).proportion_ci(0.95, method="exact").low
    assert low <= 0.05, (bad, runs)
    assert bad / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)


def test_a_real_improvement_is_found_at_the_first_decision():
    """A magic word that raises every item's p from .4 to .7, on the default split's 39 selection
    items x 3 repeats: the first decision (alpha/2) accepts it in at least 80% of runs."""
    rng = random.Random(7)
    found = sum(run_accepts(rng, {f"{i}": 0.4 for i in range(39)}, 1, 0.05, 0.3)[0] for _ in range(300))
    assert found / 300 >= 0.8, found


def test_failed_rows_are_left_out_and_counted_not_scored_as_wrong():
    """Issue 34: an outage while the seed was scored (its failed rows scored 0) let a no-op edit
    through (0.278 -> 0.583, p = 0.0005). Left out, the same rows decide nothing."""
    seed_rows, candidate_rows = [], []
    for i in range(36):
        for run in range(3):
            hard = int((i + run) % 2 == 0)
            outage = i % 2 == 0  # half the items lost every seed row to the outage
            seed_rows.append(
                {
                    "id": str(i),
                    "run": run,
                    "hard": None if outage else hard,
                    "error": "503" if outage else None,
                }
            )
            candidate_rows.append({"id": str(i), "run": run, "hard": hard, "error": None})
    seed, seed_failed = finished_scores(seed_rows)
    candidate, candidate_failed = finished_scores(candidate_rows)
    assert (seed_failed, candidate_failed, len(seed)) == (54, 0, 18)
    decision = decide(seed, candidate, "paired", 0.05, failed=(seed_failed, candidate_failed))
    assert not decision.accepted and decision.comparison.n_items == 18 and decision.comparison.diff == 0
    record = decision.to_json()
    assert record["failed_rows"] == {"current": 54, "candidate": 0}
    row = {"step": 1, "proposed": 1, "applied": 1, "reflections": [], "gate": record}
    line = step_line(row, 8)
    assert "54 failed rows left out (54 current, 0 candidate)" in line and "one-sided p=" in line
    assert "on 18 items" in line and "alpha 0.025 (decision 1" in line


def test_a_runs_failed_rows_are_counted_by_split_from_its_history():
    """What makes `bv optimize` exit 1: every row with no verdict, once each: the seed's and each
    candidate's selection rows (the current skill's are an earlier row's, not counted again),
    each step's train rows and the test's. A count that is not a whole number counts nothing."""
    from pathlib import Path

    from bv.optimize.results import OptimizeResult
    from bv.stages.prompt import Skill

    history = [
        {"kind": "seed", "failed_rows": 3},
        {"kind": "step", "train": {"errors": 2}, "gate": {"failed_rows": {"current": 3, "candidate": 4}}},
        {"kind": "step", "train": {"errors": 0}, "gate": None},
        {"kind": "step", "train": {"errors": True}, "gate": {"failed_rows": {"current": 4, "candidate": -1}}},
    ]
    skill = Skill("seed", "- look")

    def result(test: dict) -> OptimizeResult:
        return OptimizeResult(Path("run"), 3, 1, skill, skill, skill, 1, {}, test, {}, history)

    assert result({"failed_rows": 5}).failed_rows == {"train": 2, "selection": 7, "test": 5}
    assert result({"failed_rows": "5"}).failed_rows["test"] == 0


def test_an_outage_while_the_seed_is_scored_accepts_no_edit_as_typed(tmp_path, server):
    """Issue 34, end to end: the target's server fails (503) on half the items until the optimizer
    is first asked, so the seed's selection rows of those items fail; the optimizer proposes an
    edit that changes nothing the target does. Scored 0, the failed rows made the edit an
    improvement ("accepted", 0.278 -> 0.583); left out, it is rejected, the history and the
    step line carry the count, and the run exits 1 saying how many rows failed where."""
    import hashlib
    import json

    from support.commands import bv_inproc
    from support.fakeopenai import Reply
    from support.skillserver import LABELS, SkilledTarget

    from bv.data.synth import write_sample_set

    write_sample_set(tmp_path / "data", 96, seed=0)
    (tmp_path / "seed.md").write_text("## Inspecting\n\n- Look at the whole picture first.\n")
    items = SkilledTarget(tmp_path / "data").by_image
    outage = [True]

    def bit(item: dict, n: int) -> bool:
        return bool(hashlib.sha256(str(item["taskId"]).encode()).digest()[0] >> n & 1)

    def respond(seen):
        if seen.body.get("model") == "writer":
            outage[0] = False
            edit = {"op": "append", "content": "- Take your time.", "reason": "patience"}
            return Reply(content=json.dumps({"edits": [edit]}))
        from support.skillserver import _image_bytes

        item = items[hashlib.sha256(_image_bytes(seen)).digest()]
        if outage[0] and bit(item, 0):
            return Reply(status=503)
        right = LABELS[item["choiceAns"]] if item["ansType"] == "choice" else item["blankAns"]
        wrong = "Z" if item["ansType"] == "choice" else "999"
        return Reply(content=f"\\boxed{{{right if bit(item, 1) else wrong}}}")  # whatever the skill

    server.responder = respond
    out = tmp_path / "run"
    done = bv_inproc(
        f"bv optimize {tmp_path / 'data' / 'meta_data.jsonl'} --skill {tmp_path / 'seed.md'} --out {out}"
        f" -m target --base-url {server.base_url} --api-key sk-test-target --optimizer-model writer"
        f" --optimizer-base-url {server.base_url} --mode rules --ratio 2:3:3 --batch-size 8"
        f" --minibatch 8 --edits 2 --repeats 2 --steps 1 --retries 0 --cache {tmp_path / 'c.sqlite'}"
    )
    assert done.returncode == 1, done.stderr  # a run with failed rows never ends as a result does
    seed, step = (json.loads(line) for line in (out / "history.jsonl").read_text().splitlines())
    said = done.stderr.splitlines()[-1]
    assert said.startswith("bv optimize: rows failed: ") and f" {seed['failed_rows']} selection" in said, said
    assert seed["failed_rows"] > 0 and step["candidate"] is not None
    gate = step["gate"]
    assert not step["accepted"] and gate["diff"] == 0, gate
    assert gate["failed_rows"] == {"current": seed["failed_rows"], "candidate": 0}
    assert f"{seed['failed_rows']} failed rows left out ({seed['failed_rows']} current, 0 candidate)" in (
        done.stderr
    )
