"""A Monte-Carlo simulation of the whole `bv optimize` loop, to choose bv's defaults (issue 42).

    .venv/bin/python bench/optimize_sim.py [--runs 2000] [--worlds W0,W1,...] [--designs ...]
        [--seed 0] [--json out.json] [--self-check]

The model, in short:
- A world (bench/worlds.py) gives each run its items' true accuracies without edits, and the
  true effect of every edit the optimizer writes. Accepted edits add up; an item's accuracy is
  clipped to [0, 1] after the sum.
- The items are split as bv splits them (bv.optimize.split, stratified by subtype).
- The seed is scored on the selection split: K runs per item, each a Bernoulli draw. An item's
  score is the mean of its runs. These scores are stored as the current skill's.
- Each step rolls out a train batch (it costs rollouts only: reflection is not modelled). It
  proposes one candidate: the current skill plus one new edit, with a fresh effect from the world.
  The candidate is scored on the selection split. The gate compares it with the current skill's
  stored scores. Those are lucky (they won a comparison), so some designs pay to refresh them:
  `rescore` scores the current skill afresh every step; `reaccept` scores an accepted candidate
  again and stores that; `refreshN` re-scores the current skill after N rejections in a row and
  pools those runs with its stored ones. `stopN` ends a run after N rejections in a row.
- The best skill: with `greater`, the current one at the end. Otherwise bv's rule: a candidate
  accepted with a selection score strictly above the best's recorded one becomes the best.
- At the end the seed and the best are scored on the test split (K_test runs per item).
  Unguarded designs hand back the best. Guarded ones hand it back only if the exact one-sided
  sign-flip test of best over seed on the test split gives p < alpha/2 = .025; else the seed.
- A design gets as many steps as its rollouts allow in the budget (3,200 target rollouts; W5
  twice that): the seed's selection score, the steps, and both skills on the test split.
  (Designs that re-score on the way stop each run when a step and a re-score no longer fit.)

The blind spot: the train split only costs rollouts here (min(64, train items) per step). What
a larger train split buys, more varied failures to reflect on, is not modelled, so ratios with a
small train share look better than they may be.

Measures, over R runs of each design in each world (the same worlds and edits for every design):
the true gain of the skill handed back (points, over all items), P(worse): that gain below 0,
P(false claim): the run reports a significant gain while the true gain is <= 0, power +5: the
gate keeps a +5-point edit (on every item) at its first decision, and what the run costs.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from optimize_sim_gates import bv_p, selective_ci, self_check, signflip_critical, signflip_p  # noqa: E402
from worlds import SUBTYPES, WORLDS, World  # noqa: E402

from bv.optimize.split import stratified_split  # noqa: E402

BUDGET = 3200  # target rollouts per run: what bv's old defaults spend on 388 items
BATCH, MINIBATCH = 64, 8  # bv's train batch, attempts per optimizer request
ALPHA = 0.05
GUARD = ALPHA / 2  # one-sided level of the test guard and of "reports a significant gain"
USD_ROLLOUT, USD_REQUEST = 0.004, 0.03
ASSUMPTIONS = (
    f"budget {BUDGET} target rollouts per run (W5: twice); train batch {BATCH} rollouts per step;"
    f" ${USD_ROLLOUT} per target rollout and ${USD_REQUEST} per optimizer request, one request per"
    f" {MINIBATCH} train items (judge free: rules); alpha {ALPHA}; the guard and 'reports a gain'"
    f" are one-sided at {GUARD} (guard: exact sign-flip test; unguarded: bv's paired_comparison,"
    " two-sided p < .05 with a positive difference); selective interval: normal, truncated at the"
    " exact test's cutoff given the items' |differences| (bv.core.signflip's `critical`)"
)


@dataclass(frozen=True)
class Design:
    name: str
    gate: str  # greater | paired-halving | paired-fixed | paired-horizon | exact-halving | exact-fixed
    ratio: tuple[int, int, int]
    k: int = 1  # runs per selection item
    k_test: int | None = None  # runs per test item (default k)
    guard: bool = False
    guard_level: float = GUARD  # one-sided level of the guard's exact test
    rescore: bool = False
    reaccept: bool = False  # score an accepted candidate afresh and store those scores instead
    refresh: int = 0  # after this many rejections in a row, re-score the current skill (pooled)
    stop: int = 0  # stop after this many rejections in a row (0: never)
    level: float = 0.20  # per-decision level of the -fixed gates
    margin: float = 0.0  # points by which `greater` must beat the current score
    epochs: int = 0  # bv's step count (epochs x train batches; W5 twice) instead of the budget's

    @property
    def kt(self) -> int:
        return self.k if self.k_test is None else self.k_test

    def label(self) -> str:
        bits = [self.gate + (f" {self.level:g}" if "fixed" in self.gate else "")]
        bits += [f"+{self.margin:g}pt"] if self.margin else []
        bits += [":".join(map(str, self.ratio)), f"K{self.k}/{self.kt}"]
        bits += [f"guard {self.guard_level:g}"] if self.guard else []
        bits += [b for b, on in (("rescore", self.rescore), ("re-score accepted", self.reaccept)) if on]
        bits += [f"stop{self.stop}"] if self.stop else []
        bits += [f"refresh{self.refresh}"] if self.refresh else []
        bits += [f"{self.epochs} epochs (bv's steps)"] if self.epochs else []
        return " ".join(bits)


def _d(name: str, gate: str, ratio: str, **kw: object) -> Design:
    r = tuple(int(x) for x in ratio.split(":"))
    return Design(name, gate, (r[0], r[1], r[2]), **kw)  # type: ignore[arg-type]


DESIGNS: dict[str, Design] = {
    d.name: d
    for d in (
        _d("bv", "greater", "2:2:6", guard=True, guard_level=ALPHA, refresh=4),  # bv's defaults
        _d("reference", "greater", "2:1:7"),
        _d("bv-old", "paired-halving", "2:1:7", k=3, epochs=4),
        _d("bv-old-budget", "paired-halving", "2:1:7", k=3),
        _d("halving-235", "paired-halving", "2:3:5", k=3),
        _d("halving-111", "paired-halving", "1:1:1", k=3),
        _d("fixed.2-guard-235", "paired-fixed", "2:3:5", guard=True),
        _d("horizon-235", "paired-horizon", "2:3:5"),
        _d("horizon-guard-235", "paired-horizon", "2:3:5", guard=True),
        _d("exact-halving-guard-235", "exact-halving", "2:3:5", k=3, guard=True),
        _d("exact-fixed.2-guard-235", "exact-fixed", "2:3:5", guard=True),
        _d("greater-guard-217", "greater", "2:1:7", guard=True),
        _d("greater-guard-235", "greater", "2:3:5", guard=True),
        _d("greater-guard-111", "greater", "1:1:1", guard=True),
        _d("greater-guard-122", "greater", "1:2:2", guard=True),
        _d("greater-guard-244", "greater", "2:4:4", guard=True),
        _d("greater-guard-136", "greater", "1:3:6", guard=True),
        _d("greater-guard-235-t2", "greater", "2:3:5", k_test=2, guard=True),
        _d("greater-guard-235-k2", "greater", "2:3:5", k=2, k_test=1, guard=True),
        _d("greater-guard-rescore-235", "greater", "2:3:5", guard=True, rescore=True),
        _d("greater-guard-stop6-235", "greater", "2:3:5", guard=True, stop=6),
        _d("greater+1pt-guard-235", "greater", "2:3:5", guard=True, margin=1.0),
        _d("greater-guard-226", "greater", "2:2:6", guard=True),
        _d("greater-guard.05-235", "greater", "2:3:5", guard=True, guard_level=0.05),
        _d("greater-guard-reaccept-235", "greater", "2:3:5", guard=True, reaccept=True),
        _d("greater-guard-refresh5-235", "greater", "2:3:5", guard=True, refresh=5),
        _d("greater-guard-refresh5-226", "greater", "2:2:6", guard=True, refresh=5),
        _d("greater-guard-refresh3-226", "greater", "2:2:6", guard=True, refresh=3),
        _d("greater-guard-refresh4-226", "greater", "2:2:6", guard=True, refresh=4),
        _d("greater-guard-refresh4-226-t2", "greater", "2:2:6", k_test=2, guard=True, refresh=4),
    )
}


def parse_design(text: str) -> Design:
    """A name of DESIGNS, or gate/ratio[/kN][/tN][/guard][/gX][/rescore][/reaccept][/refreshN]
    [/stopN][/levelX][/marginX] (k: selection runs, t: test runs, g: the guard's one-sided level,
    margin in points)."""
    if text in DESIGNS:
        return DESIGNS[text]
    gate, ratio, *rest = text.split("/")
    d = _d(text, gate, ratio)
    for token in rest:
        if token in ("guard", "rescore", "reaccept"):
            d = replace(d, **{token: True})
        else:
            keys = ("k", "t", "stop", "refresh", "level", "margin", "g", "epochs")
            key = next(k for k in keys if token.startswith(k))
            value = token[len(key) :]
            field = {"t": "k_test", "g": "guard_level"}.get(key, key)
            whole = ("k", "t", "stop", "refresh", "epochs")
            d = replace(d, **{field: int(value) if key in whole else float(value)})
    return d


@functools.cache
def parts_of(n_items: int, ratio: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Item indices of train, selection and test, by bv's own split (item k in subtype k mod 22)."""
    split = stratified_split({str(k): str(k % SUBTYPES) for k in range(n_items)}, ratio, 0)
    train, sel, test = (
        np.array(sorted(int(i) for i in p)) for p in (split.train, split.selection, split.test)
    )
    return train, sel, test


def plan(design: Design, world: World) -> tuple[int, int, int, int, int]:
    """(train batch, selection items, test items, steps, rollouts per step)."""
    train, sel, test = parts_of(world.n_items, design.ratio)
    batch = min(BATCH, len(train))
    per_step = batch + len(sel) * design.k * (2 if design.rescore else 1)
    if design.epochs:
        steps = int(design.epochs * world.budget) * math.ceil(len(train) / BATCH)
    else:
        left = BUDGET * world.budget - len(sel) * design.k - 2 * len(test) * design.kt
        # bv's rule: a re-score of the current skill is reserved every `refresh` steps, so the
        # step count is known before the run and the run stays within its budget
        reserve = len(sel) * design.k / design.refresh if design.refresh else 0.0
        steps = max(0, int(left // (per_step + reserve)))
    return batch, len(sel), len(test), steps, per_step


def score(rng: np.random.Generator, accuracy: np.ndarray, k: int) -> np.ndarray:
    """Each item's mean over k Bernoulli runs."""
    return rng.binomial(k, accuracy) / k


def accept(design: Design, current: np.ndarray, candidate: np.ndarray, j: int, horizon: int) -> np.ndarray:
    """The gate's decision in each run at the run's j-th decision."""
    diff = candidate.mean(1) - current.mean(1)
    if design.gate == "greater":
        return diff > design.margin / 100
    level = {
        "paired-halving": ALPHA / 2**j,
        "exact-halving": ALPHA / 2**j,
        "paired-fixed": design.level,
        "exact-fixed": design.level,
        "paired-horizon": ALPHA / max(horizon, 1),
    }[design.gate]
    out = np.zeros(len(diff), dtype=bool)
    rows = diff > 0
    if rows.any():
        test = bv_p if design.gate.startswith("paired") else signflip_p
        out[rows] = test(current[rows], candidate[rows], design.k) < level
    return out


def simulate(design: Design, world: World, wi: int, runs: int, seed: int) -> dict[str, np.ndarray]:
    """Per-run results of one design in one world."""
    _, sel, test = parts_of(world.n_items, design.ratio)
    batch, _, _, steps, per_step = plan(design, world)
    base = world.draw_base(np.random.default_rng([seed, wi, 0]), runs)
    rng = np.random.default_rng([seed, wi, 2])
    seed_acc = np.clip(base, 0, 1)
    cum = np.zeros_like(base)  # the current skill's accepted effects
    best_cum, best_seed = cum, np.ones(runs, dtype=bool)
    stored = score(rng, seed_acc[:, sel], design.k)
    best_score = stored.mean(1)
    active, streak = np.ones(runs, dtype=bool), np.zeros(runs, dtype=int)
    used, accepted = np.zeros(runs, dtype=int), np.zeros(runs, dtype=int)
    spent = np.full(runs, len(sel) * design.k)
    room = BUDGET * world.budget - 2 * len(test) * design.kt
    pooled = np.ones(runs, dtype=int)  # score sets pooled in the current skill's stored scores
    for t in range(steps):
        cand_cum = cum + world.draw_effects(np.random.default_rng([seed, wi, 1, t]), runs)
        cand = score(rng, np.clip(base[:, sel] + cand_cum[:, sel], 0, 1), design.k)
        current = stored
        if design.rescore:
            current = score(rng, np.clip(base[:, sel] + cum[:, sel], 0, 1), design.k)
        ok = accept(design, current, cand, t + 1, steps) & active
        used += active
        accepted += ok
        if design.reaccept:  # the winner's scores are lucky: store fresh ones (paid from the budget)
            cand = np.where(
                ok[:, None], score(rng, np.clip(base[:, sel] + cand_cum[:, sel], 0, 1), design.k), cand
            )
            spent += ok * len(sel) * design.k
        cum = np.where(ok[:, None], cand_cum, cum)
        stored = np.where(ok[:, None], cand, stored)
        if design.gate != "greater":  # bv's rule for the best
            new = ok & (cand.mean(1) > best_score)
            best_cum = np.where(new[:, None], cand_cum, best_cum)
            best_score = np.where(new, cand.mean(1), best_score)
            best_seed &= ~new
        streak = np.where(ok, 0, streak + 1)
        spent += active * per_step
        if design.stop:
            active &= streak < design.stop
        if design.refresh:  # the current skill's stored scores pooled with a fresh score
            again = active & (streak > 0) & (streak % design.refresh == 0)
            fresh = score(rng, np.clip(base[:, sel] + cum[:, sel], 0, 1), design.k)
            stored = np.where(
                again[:, None], (stored * pooled[:, None] + fresh) / (pooled[:, None] + 1), stored
            )
            pooled = np.where(ok, 1, pooled + again)
            spent += again * len(sel) * design.k
        if design.reaccept and not design.epochs:  # while a step and a re-score fit
            active &= spent + per_step + len(sel) * design.k <= room
    if design.gate == "greater":
        best_cum, best_seed = cum, accepted == 0
    best_acc = np.clip(base + best_cum, 0, 1)
    seed_t = score(rng, seed_acc[:, test], design.kt)
    best_t = np.where(best_seed[:, None], seed_t, score(rng, best_acc[:, test], design.kt))
    p, cutoff = signflip_critical(seed_t, best_t, design.kt, design.guard_level)
    passed = (p < design.guard_level) & ~best_seed
    handed = passed if design.guard else ~best_seed
    true_gain = (best_acc - seed_acc).mean(1)
    gain = np.where(handed, true_gain, 0.0)
    exact = (p < GUARD) & ~best_seed  # the exact test at .025, whatever the guard's level
    claim = passed if design.guard else (bv_p(seed_t, best_t, design.kt) < GUARD) & ~best_seed
    out = {
        "gain": gain,
        "handed": handed,
        "claim": claim,
        "claim_exact": exact,
        "accepted": accepted,
        "used": used,
        "rollouts": spent + len(test) * design.kt * (1 + ~best_seed),
        "requests": used * math.ceil(batch / MINIBATCH),
    }
    if design.guard:  # the intervals of the handed-back runs (nan elsewhere)
        d = (best_t - seed_t)[handed]
        diff, se = d.mean(1), d.std(1, ddof=1) / math.sqrt(len(test))
        low, high = selective_ci(diff, se, cutoff[handed])
        gain_h = true_gain[handed]
        for key, value in (
            ("sel_cover", (low <= gain_h) & (gain_h <= high)),
            ("sel_width", high - low),
            ("naive_cover", np.abs(diff - gain_h) <= 1.959964 * se),
            ("naive_width", 2 * 1.959964 * se),
        ):
            out[key] = np.full(runs, np.nan)
            out[key][handed] = value
    return out


def power5(design: Design, world: World, wi: int, runs: int, seed: int) -> float:
    """P(the gate keeps a +5-point edit on every item at its first decision, from the seed)."""
    _, sel, _ = parts_of(world.n_items, design.ratio)
    steps = plan(design, world)[3]
    rng = np.random.default_rng([seed, wi, 3])
    base = world.draw_base(rng, runs)[:, sel]
    seed_scores = score(rng, np.clip(base, 0, 1), design.k)
    cand = score(rng, np.clip(base + 0.05, 0, 1), design.k)
    return float(accept(design, seed_scores, cand, 1, steps).mean())


def summary(design: Design, world: World, wi: int, runs: int, seed: int) -> dict[str, float]:
    sizes = [len(part) for part in parts_of(world.n_items, design.ratio)]
    if min(sizes) == 0:  # bv refuses a split that leaves a part empty
        return {"na": 1.0, "split": "/".join(map(str, sizes))}  # type: ignore[dict-item]
    r = simulate(design, world, wi, runs, seed)
    _, sel, test, steps, _ = plan(design, world)
    gain = r["gain"]
    row = {
        "gain": 100 * gain.mean(),
        "se": 100 * gain.std(ddof=1) / math.sqrt(runs),
        "worse": float((gain < -1e-12).mean()),
        "false": float((r["claim"] & (gain <= 1e-12)).mean()),
        "false_exact": float((r["claim_exact"] & (gain <= 1e-12)).mean()),
        "power5": power5(design, world, wi, runs, seed),
        "handed": float(r["handed"].mean()),
        "accepted": float(r["accepted"].mean()),
        "steps": steps,
        "used": float(r["used"].mean()),
        "split": f"{world.n_items - sel - test}/{sel}/{test}",
        "rollouts": float(r["rollouts"].mean()),
        "usd": float((USD_ROLLOUT * r["rollouts"] + USD_REQUEST * r["requests"]).mean()),
        # the model gives train items no value: a design whose train split holds less than one
        # batch on the 388 items only looks cheaper, so it is not eligible as a default
        "full_batch": float(len(parts_of(388, design.ratio)[0]) >= BATCH),
    }
    if design.guard:
        h = r["handed"]
        for key in ("sel_cover", "sel_width", "naive_cover", "naive_width"):
            row[key] = float(r[key][h].mean()) if h.any() else float("nan")
        row["sel_width_median"] = float(np.median(r["sel_width"][h])) if h.any() else float("nan")
        row["n_handed"] = int(h.sum())
    return row


def eligible(row: dict[str, float]) -> bool:
    ok = row.get("full_batch", 1.0) == 1.0
    return "na" not in row and ok and row["worse"] <= ALPHA and row["false"] <= ALPHA


def best_of(results: dict[str, dict[str, dict[str, float]]], world: str) -> str | None:
    ok = [(r[world]["gain"], name) for name, r in results.items() if eligible(r[world])]
    return max(ok)[1] if ok and max(ok)[0] > 1e-9 else None  # W0: nothing to gain, no best


def _share(gain: float, best: float) -> str:
    return f"{gain / best:.0%}" if best > 1e-9 else "—"


def _steps(r: dict[str, float]) -> str:
    return f"{r['steps']}" if r["used"] == r["steps"] else f"{r['steps']} ({r['used']:.1f})"


def render(results: dict[str, dict[str, dict[str, float]]], designs: list[Design], worlds: list[str]) -> str:
    pct = "{:.1%}".format
    lines: list[str] = []
    for w in worlds:
        best = best_of(results, w)
        top = results[best][w]["gain"] if best else float("nan")
        lines += [
            f"\n### {w}: {WORLDS[w].about} ({WORLDS[w].n_items} items, accuracy {WORLDS[w].accuracy})\n",
            "| design | train/sel/test | steps | gain (points) | P(worse) | P(false claim) | power +5 |"
            " handed back | accepted | rollouts | $ | share of best |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for d in designs:
            r = results[d.name][w]
            if "na" in r:
                lines.append(f"| {d.name} <br>{d.label()} | {r['split']} | n/a: a part is empty |" + " |" * 9)
                continue
            mark = " **best**" if d.name == best else ("" if eligible(r) else " ✗")
            lines.append(
                f"| {d.name}{mark} <br>{d.label()} | {r['split']} | {_steps(r)} |"
                f" {r['gain']:+.2f} ± {r['se']:.2f} | {pct(r['worse'])} | {pct(r['false'])} |"
                f" {r['power5']:.0%} | {r['handed']:.0%} | {r['accepted']:.2f} | {r['rollouts']:.0f} |"
                f" {r['usd']:.2f} | {_share(r['gain'], top) if best else '—'} |"
            )
    lines += ["\n### Gain by world (points; share of the world's best eligible design; ✗: not eligible)\n"]
    lines += ["| design | " + " | ".join(worlds) + " |", "|---" * (len(worlds) + 1) + "|"]
    tops = {w: (results[b][w]["gain"] if (b := best_of(results, w)) else float("nan")) for w in worlds}
    for d in designs:
        cells = []
        for w in worlds:
            r = results[d.name][w]
            if "na" in r:
                cells.append("n/a")
                continue
            flag = "" if eligible(r) else " ✗"
            cells.append(f"{r['gain']:+.2f} ({_share(r['gain'], tops[w])}){flag}")
        lines.append(f"| {d.name} | " + " | ".join(cells) + " |")
    guarded = [d for d in designs if d.guard]
    if guarded:
        lines += [
            "\n### Guarded designs: the 95% interval of the gain among handed-back runs"
            " (coverage of the true gain over all items, mean width in points): selective"
            " (median width) / naive\n",
            "| design | " + " | ".join(worlds) + " |",
            "|---" * (len(worlds) + 1) + "|",
        ]
        for d in guarded:
            cells = []
            for w in worlds:
                r = results[d.name][w]
                if "na" in r or not r.get("n_handed"):
                    cells.append("—")
                    continue
                cells.append(
                    f"{r['sel_cover']:.0%} {100 * r['sel_width']:.1f} ({100 * r['sel_width_median']:.1f})"
                    f" / {r['naive_cover']:.0%}"
                    f" ({100 * r['naive_width']:.1f}) n={r['n_handed']}"
                )
            lines.append(f"| {d.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def check_defaults() -> None:
    """The design named `bv` is bv optimize's defaults: stop when they have drifted apart."""
    from bv.optimize.results import OptimizeOptions

    o, d = OptimizeOptions(), DESIGNS["bv"]
    ours = (o.gate, o.ratio, o.repeats, o.refresh, o.alpha, o.batch_size, o.budget)
    theirs = (d.gate, d.ratio, d.k, d.refresh, d.guard_level, BATCH, BUDGET)
    if ours != theirs or d.kt != o.repeats or not d.guard:
        raise SystemExit(f"the `bv` design {theirs} is not bv optimize's defaults {ours}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--worlds", default=",".join(WORLDS))
    ap.add_argument("--designs", default=",".join(DESIGNS), help="names, or gate/ratio[/k3/t1/guard/...]")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--self-check", action="store_true", help="check the statistics against bv and exit")
    args = ap.parse_args(argv)
    if args.self_check:
        print("\n".join(self_check(args.seed)))
        return 0
    check_defaults()
    worlds = args.worlds.split(",")
    designs = [parse_design(t) for t in args.designs.split(",")]
    order = list(WORLDS)
    started = time.perf_counter()
    results: dict[str, dict[str, dict[str, float]]] = {}
    for d in designs:
        results[d.name] = {w: summary(d, WORLDS[w], order.index(w), args.runs, args.seed) for w in worlds}
        print(f"{d.name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    command = " ".join(["bench/optimize_sim.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"## `bv optimize` simulated: {args.runs} runs per design and world\n")
    print(f"Command: `.venv/bin/python {command}` (seed {args.seed}).\n")
    print("Worlds: " + "; ".join(f"{w}: {WORLDS[w].about}" for w in worlds) + ".\n")
    print(f"Assumptions: {ASSUMPTIONS}.\n")
    print(
        "Gain: mean true gain of the handed-back skill over the seed, over all items, ± Monte-Carlo"
        " s.e. **best**: the highest gain with P(worse) <= 5% and P(false claim) <= 5%; ✗: fails one."
    )
    print(render(results, designs, worlds))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    if args.json:
        meta = {"command": command, "runs": args.runs, "seed": args.seed, "assumptions": ASSUMPTIONS}
        payload = {"meta": meta, "designs": {d.name: asdict(d) for d in designs}, "results": results}
        args.json.write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
