"""The gate's false-accept rate, by simulation: a candidate no better than the current skill (the
same per-item accuracy, sampled anew) is accepted by the paired gate at most alpha of the time,
and by the reference's "strictly higher" rule far more often. The direction and the test are
checked against a hand computation of the one-sided exact McNemar test."""

from __future__ import annotations

import math
import random

from bv.optimize.gate import decide


def sampled(rng: random.Random, accuracy: dict[str, float], repeats: int) -> dict[str, list[float]]:
    return {item: [float(rng.random() < p) for _ in range(repeats)] for item, p in accuracy.items()}


def false_accepts(gate: str, alpha: float, *, items: int, repeats: int, trials: int, seed: int) -> float:
    rng = random.Random(seed)
    accepted = 0
    for _ in range(trials):
        # per-item accuracies like a target's on BabyVision: many items always or never right
        accuracy = {f"{i}": rng.choice([0.0, 0.0, 1.0, rng.random(), rng.random()]) for i in range(items)}
        current, candidate = sampled(rng, accuracy, repeats), sampled(rng, accuracy, repeats)
        accepted += decide(current, candidate, gate, alpha).accepted
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
    # one run per item: 7 items improved, 1 regressed, 30 unchanged
    current = {f"{i}": [0.0] for i in range(7)} | {"r": [1.0]} | {f"u{i}": [1.0] for i in range(30)}
    candidate = {f"{i}": [1.0] for i in range(7)} | {"r": [0.0]} | {f"u{i}": [1.0] for i in range(30)}
    by_hand = sum(math.comb(8, k) for k in (7, 8)) / 2**8  # P(at least 7 of 8 discordant improve)
    decision = decide(current, candidate, "paired", 0.05)
    assert math.isclose(decision.comparison.p_value, by_hand) and decision.accepted  # 0.035
    backwards = decide(candidate, current, "paired", 0.05)
    assert not backwards.accepted and backwards.comparison.p_value > 0.9
    assert decision.to_json()["improved"] == 7 and decision.to_json()["regressed"] == 1
