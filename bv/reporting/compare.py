"""Inputs compared per item: each against the baseline, overall and by group, with adjusted p-values,
the power of such a comparison, and what else differs between the inputs (their provenance).

The statistics are bv.core.stats's; this module feeds them each item's runs from a Tally and
shapes the results as the report's JSON (bv.reporting.report_types).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from bv.core.paired import Alternative, PairedComparison, paired_comparison
from bv.core.power import PowerPlan, paired_power, single_power
from bv.core.shards import problems as shard_problems
from bv.core.stats import ADJUSTMENT_NAMES, ADJUSTMENTS, p_beside, points
from bv.reporting.report_types import Built, Difference, Paired, Power, Summary
from bv.reporting.tally import GROUPS, Tally

ItemRuns = dict[str, list[float]]
POWER_TARGETS = (2, 3, 5)  # points: what --power says the items and runs for
SIGNIFICANT = 0.05  # a comparison's p below this is a verdict of better or worse


def item_runs(tally: Tally, exclude_failed: bool = False) -> ItemRuns:
    """item -> its per-run scores (1.0 right, 0.0 not), the shape bv.core.stats reads."""
    return {
        item: [1.0] * right + [0.0] * (n - right)
        for item, (right, n) in tally.item_scores(exclude_failed).items()
    }


def _rounded(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def difference(result: PairedComparison, adjusted: float) -> Difference:
    """One paired comparison as the report's JSON holds it."""
    ci = None if math.isnan(result.ci95[0]) else [round(result.ci95[0], 6), round(result.ci95[1], 6)]
    return {
        "n_items": result.n_items,
        "mean_a": _rounded(result.mean_a),
        "mean_b": _rounded(result.mean_b),
        "diff": _rounded(result.diff),
        "ci95": ci,
        "p_value": result.p_value,
        "p_adjusted": adjusted,
        "improved": result.improved,
        "regressed": result.regressed,
        "unchanged": result.unchanged,
        "correlation": None if result.correlation is None else round(result.correlation, 6),
    }


def _by_group(
    a: ItemRuns,
    b: ItemRuns,
    groups: Mapping[str, tuple[str, str, str]],
    index: int,
    adjust: str,
    alternative: Alternative,
    clusters: Mapping[str, str] | None,
) -> dict[str, Difference]:
    """The comparison within each group of one level (type, subtype, answer type), p adjusted
    for the number of groups at that level; clustered where a group spans several clusters."""
    members: dict[str, list[str]] = {}
    for item in a:
        if item in b and item in groups:
            members.setdefault(groups[item][index], []).append(item)
    results = {
        label: paired_comparison(
            {i: a[i] for i in items}, {i: b[i] for i in items}, alternative=alternative, clusters=clusters
        )
        for label, items in sorted(members.items())
    }
    adjusted = ADJUSTMENTS[adjust]([r.p_value for r in results.values()])
    return {label: difference(r, p) for (label, r), p in zip(results.items(), adjusted, strict=True)}


def compare(
    names: Sequence[str],
    tallies: Sequence[Tally],
    baseline: int = 0,
    *,
    exclude_failed: bool = False,
    adjust: str = "holm",
    alternative: Alternative = "two-sided",
    cluster: str | None = None,
) -> list[Paired]:
    """Each input against the baseline, per item; the overall p-values adjusted over the pairs.
    `cluster` ("type" or "subtype") clusters the differences' standard errors as the accuracies'."""
    runs = [item_runs(t, exclude_failed) for t in tallies]
    groups = tallies[baseline].item_groups
    at = next((i for i, (_, name) in enumerate(GROUPS) if name == cluster), None)
    clusters = {item: labels[at] for item, labels in groups.items()} if at is not None else None
    a = runs[baseline]
    others = [i for i in range(len(names)) if i != baseline]
    overall = [paired_comparison(a, runs[i], alternative=alternative, clusters=clusters) for i in others]
    adjusted = ADJUSTMENTS[adjust]([r.p_value for r in overall])
    pairs: list[Paired] = []
    for i, result, p in zip(others, overall, adjusted, strict=True):
        b = runs[i]
        moved = [(item, sum(b[item]) / len(b[item]) - sum(a[item]) / len(a[item])) for item in a if item in b]
        by = {
            group: _by_group(a, b, groups, index, adjust, alternative, clusters)
            for index, (group, _) in enumerate(GROUPS)
        }
        pair: Paired = {
            **difference(result, p),
            "a": names[baseline],
            "b": names[i],
            "method": result.method,
            "verdict": "",
            "improved_ids": sorted(item for item, d in moved if d > 1e-12),
            "regressed_ids": sorted(item for item, d in moved if d < -1e-12),
            "by_type": by["by_type"],
            "by_subtype": by["by_subtype"],
            "by_ans_type": by["by_ans_type"],
        }
        pair["verdict"] = verdict(pair, adjust if len(others) > 1 else None)
        pairs.append(pair)
    return pairs


def shown_points(value: float | None, sign: bool = True) -> str:
    """A difference or an interval end in points (stats.points: never 0 unless it is), or "–"."""
    return "–" if value is None else points(value, sign)


def verdict(pair: Paired, adjusted_by: str | None = None) -> str:
    """Better or not, and by how much, in one line. The p-value is the interval's own (two-sided),
    so without an adjustment "significant" is "the interval excludes 0"; an adjusted p is
    compared instead, beside the interval as it was before the adjustment (said)."""
    p = pair["p_adjusted"] if adjusted_by else pair["p_value"]
    p_text = f"two-sided p = {p_beside(p, SIGNIFICANT, 3)}"  # digits enough to read beside 0.05
    p_text += f", {ADJUSTMENT_NAMES[adjusted_by]}-adjusted" if adjusted_by else ""
    ci = pair["ci95"]
    unadjusted = ", unadjusted" if adjusted_by else ""
    ends = f"{shown_points(ci[0])} to {shown_points(ci[1])}" if ci else ""  # an end not 0 never reads 0
    interval = f"two-sided 95% CI{unadjusted} {ends}" if ci else "no interval"
    a, b, diff = pair["a"], pair["b"], pair["diff"]
    counts = (
        f"on {pair['n_items']} items: {pair['improved']} improved, {pair['regressed']} regressed,"
        f" {pair['unchanged']} unchanged ({pair['method']})"
    )
    if diff is None:
        return f"{b} vs {a}: no items in common"
    size = f"{points(abs(diff), sign=False)} points ({interval}; {p_text})"
    if p < SIGNIFICANT and diff > 0:
        return f"{b} is better than {a} by {size} {counts}"
    if p < SIGNIFICANT and diff < 0:
        return f"{b} is worse than {a} by {size} {counts}"
    moved = shown_points(diff)
    return f"{b} vs {a}: no significant difference, {moved} points ({interval}; {p_text}) {counts}"


def _power(plan: PowerPlan, a: str, b: str | None) -> Power:
    valid = not math.isnan(plan.var_diff)
    return {
        "a": a,
        "b": b,
        "n_items": plan.n_items,
        "runs": round(plan.runs, 3),
        "var_diff": round(plan.var_diff, 6) if valid else None,
        "noise_per_run": round(plan.noise_per_run, 6),
        "alpha": plan.alpha,
        "power": plan.power,
        "mde": round(plan.mde, 6) if valid else None,
        "items_needed": {str(t): plan.items_for(t / 100) if valid else None for t in POWER_TARGETS},
        "runs_needed": {str(t): plan.runs_for(t / 100) if valid else None for t in POWER_TARGETS},
    }


def power(
    names: Sequence[str], tallies: Sequence[Tally], baseline: int = 0, exclude_failed: bool = False
) -> list[Power]:
    """The power plan of each comparison with the baseline; with one input, of a like input."""
    runs = [item_runs(t, exclude_failed) for t in tallies]
    if len(names) == 1:
        return [_power(single_power(runs[0]), names[0], None)]
    return [
        _power(paired_power(runs[baseline], runs[i]), names[baseline], names[i])
        for i in range(len(names))
        if i != baseline
    ]


def power_lines(plans: Sequence[Power]) -> list[str]:
    """--power in words."""
    lines = []
    for plan in plans:
        who = (
            f"{plan['b']} vs {plan['a']}"
            if plan["b"]
            else f"{plan['a']} vs a like input (correlation 0 assumed)"
        )
        if plan["mde"] is None:
            lines.append(f"Power, {who}: too few items to estimate Var(d)")
            continue
        needs = []
        for target in POWER_TARGETS:
            items, runs = plan["items_needed"][str(target)], plan["runs_needed"][str(target)]
            if plan["runs"] == 1:  # no item was run twice: its run-to-run noise is unknown, not 0
                on_these = (
                    "runs per item: unknown (run-to-run noise cannot be estimated from one run per item)"
                )
            else:
                on_these = (
                    f"{runs} runs per item on these items" if runs else "no number of runs on these items"
                )
            needs.append(f"{target} points needs {items} items at {plan['runs']:g} runs, or {on_these}")
        lines.append(
            f"Power, {who}: at 80% power and two-sided alpha 0.05, {plan['n_items']} items and"
            f" {plan['runs']:g} runs per item detect a difference of"
            f" {shown_points(plan['mde'], False)} points"
            f" (Var(d) = {plan['var_diff']:.4f}, run-to-run noise {plan['noise_per_run']:.4f});"
            f" {'; '.join(needs)}"
        )
    return lines


PROVENANCE = (
    "model",
    "endpoint",
    "skill",
    "style",
    "prompts",
    "params",
    "judge",
    "judge_version",
    "bv_version",
)


def provenance_of(summary: Summary) -> dict[str, str]:
    """An input's provenance, one text per field, as the footer and the HTML show it side by side."""
    made = summary["provenance"]
    made_by = made.get("made_by") or {}
    fields = {
        "model": ", ".join(summary.get("models") or []),
        "endpoint": ", ".join(made.get("endpoints") or []),
        "skill": made_by.get("skill", ""),
        "style": made_by.get("style", ""),
        "prompts": made_by.get("prompts", ""),
        "params": ", ".join(made.get("params") or []),
        "judge": ", ".join(made.get("judge_models") or []) or _verdicts_of(made.get("backends") or []),
        "judge_version": made_by.get("judge_version", ""),
        "bv_version": ", ".join(made.get("bv_versions") or []),
    }
    started = made.get("started_at")
    fields["dates"] = f"{started['first']} to {started['last']}" if started else ""
    return fields


def _verdicts_of(backends: Sequence[str]) -> str:
    """Who judged rows without a judge model: bv's rules, or the tool whose rows `bv import` read."""
    if "imported" not in backends:
        return "rules"
    return "the imported tool's verdicts" + (" and rules" if len(backends) > 1 else "")


def differences(summaries: Sequence[Summary]) -> dict[str, list[str]]:
    """Provenance fields (dates aside) whose values differ between the inputs."""
    seen = [provenance_of(s) for s in summaries]
    out = {}
    for name in PROVENANCE:
        values = list(dict.fromkeys(p[name] for p in seen))
        if len(values) > 1:
            out[name] = values
    return out


def difference_warning(differs: Mapping[str, list[str]], by: Sequence[str] = ()) -> str | None:
    """A warning when the inputs differ in more than the one thing compared (with --by, in
    anything but the --by fields): a difference may come from any of them."""
    others = [name for name in differs if name not in by]
    if len(others) > (0 if by else 1):
        shown = "; ".join(f"{name}: {' vs '.join(differs[name])}" for name in others)
        return (
            f"the inputs differ in more than the one thing compared ({shown});"
            " a difference may come from any of these"
        )
    return None


def notices(report: Built, by: tuple[str, ...] = ()) -> list[str]:
    """What a reader must know before trusting the figures: runs covering different items,
    inputs with different items, inputs that differ in more than the one thing compared, shards
    missing or of mixed counts (bv.core.shards).
    On stderr, in every format; `--strict` makes them an error."""
    summaries = report["inputs"] if "inputs" in report else [report]
    lines = []
    for s in summaries:
        if not s["complete"]:
            runs = ", ".join(f"run {run} {n}" for run, n in s["items_per_run"].items())
            cell = s["overall"]
            gap = (
                f" (Avg@k {100 * cell['accuracy']:.1f}%, the item-level accuracy the interval"
                f" is of {100 * cell['item_accuracy']:.1f}%)"
                if cell["accuracy"] is not None and cell["item_accuracy"] is not None
                else ""
            )
            lines.append(
                f"{s['name']}: incomplete: its runs cover different items"
                f" ({runs}, of {cell['n']} items);"
                " Avg@k averages runs over different items, the interval is of the mean of each"
                f" item's runs{gap}"
            )
        lines += [
            f"{s['name']}: {line}"
            for line in shard_problems(dict(s["provenance"].get("shards") or {}) or None)
        ]
    comparison = report.get("comparison") if "inputs" in report else None
    if comparison:
        items = comparison["items"]
        if len(set(items.values())) > 1 or any(comparison["left_out"].values()):
            counts = ", ".join(f"{name} {n}" for name, n in items.items())
            left = ", ".join(f"{name} {n}" for name, n in comparison["left_out"].items())
            lines.append(
                f"the inputs cover different rows (items: {counts});"
                f" compared on the {comparison['common_items']} items ({comparison['common_rows']} rows)"
                f" they all have; rows left out: {left}"
            )
        warning = difference_warning(comparison["differs"], by)
        if warning:
            lines.append(warning)
    return lines
