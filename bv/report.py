"""Aggregation for `bv report`: accuracy overall and by type, subtype and answer type.

With several runs (`run` 0..K-1) the accuracy is the paper's Avg@k: the mean over runs of
each run's accuracy, with the population standard deviation over runs, as the official
compute_score.py does; with one run, a Wilson 95% interval. Rollout failures count wrong
(the official protocol) and are also counted in `errors`; judge errors are left out of
the accuracy and counted in `judge_errors`; rules-undecided rows count wrong and are
counted in `undecided`. Nothing is hidden in the accuracy.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bv.records import row_key
from bv.stats import mcnemar_exact, mean, pstdev, wilson


def chance_of(row: dict[str, Any]) -> float:
    """Expected accuracy of a uniform guess: 1/options for choice items, 0 for blank ones."""
    if row.get("ans_type") == "choice" and row.get("choices"):
        return 1 / len(row["choices"])
    return 0.0


def _cell(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one group of rows (all runs together)."""
    runs: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        runs[row.get("run", 0)].append(row)
    per_run = []
    for run in sorted(runs):
        judged = [r for r in runs[run] if r.get("hard") is not None]
        if judged:
            per_run.append(sum(r["hard"] for r in judged) / len(judged))
    judged_rows = [r for r in rows if r.get("hard") is not None]
    correct = sum(r["hard"] for r in judged_rows)
    items = {str(r["id"]) for r in rows}
    cell: dict[str, Any] = {
        "n": len(items),
        "rows": len(rows),
        "runs": len(runs),
        "correct": correct,
        "accuracy": round(mean(per_run), 6) if per_run else None,
        "std": round(pstdev(per_run), 6) if len(per_run) > 1 else None,
        "per_run": [round(a, 6) for a in per_run],
        "ci95": None,
        "chance": round(mean([chance_of(r) for r in rows]), 6) if rows else None,
        "errors": sum(1 for r in rows if r.get("error")),
        "judge_errors": sum(1 for r in rows if r.get("decided_by") == "error"),
        "undecided": sum(1 for r in rows if r.get("undecided")),
    }
    if len(runs) == 1 and judged_rows:
        low, high = wilson(correct, len(judged_rows))
        cell["ci95"] = [round(low, 6), round(high, 6)]
    return cell


def _usage(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from bv.extract import has_answer

    latencies = [r["latency_s"] for r in rows if isinstance(r.get("latency_s"), (int, float))]
    return {
        "prompt_tokens": sum((r.get("usage") or {}).get("prompt_tokens", 0) for r in rows),
        "completion_tokens": sum((r.get("usage") or {}).get("completion_tokens", 0) for r in rows),
        "latency_s_mean": round(mean(latencies), 3) if latencies else None,
        "unboxed": sum(  # replies only: a failed rollout has none
            1 for r in rows if "response" in r and not r.get("error") and not has_answer(r.get("response"))
        ),
    }


def summarize(rows: Iterable[dict[str, Any]], name: str = "results") -> dict[str, Any]:
    """Every figure the report shows for one input; judged rows only."""
    rows = [r for r in rows if "hard" in r]
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {
        "by_type": defaultdict(list),
        "by_subtype": defaultdict(list),
        "by_ans_type": defaultdict(list),
    }
    subtype_type: dict[str, str] = {}
    for row in rows:
        groups["by_type"][row.get("type", "unknown")].append(row)
        groups["by_subtype"][row.get("subtype", "unknown")].append(row)
        groups["by_ans_type"][row.get("ans_type", "unknown")].append(row)
        subtype_type.setdefault(row.get("subtype", "unknown"), row.get("type", "unknown"))
    summary: dict[str, Any] = {"name": name, "overall": _cell(rows)}
    for group, members in groups.items():
        summary[group] = {key: _cell(members[key]) for key in sorted(members)}
    for subtype, cell in summary["by_subtype"].items():
        cell["type"] = subtype_type[subtype]
    summary["models"] = sorted({str(r.get("model")) for r in rows if r.get("model")})
    summary["usage"] = _usage(rows)
    return summary


def paired(a_rows: list[dict[str, Any]], b_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """B against A on the rows both judged, paired by (id, run): what improved, what regressed,
    and the exact McNemar p-value of that split (is the difference more than chance?)."""
    a_hard = {row_key(r): r["hard"] for r in a_rows if r.get("hard") is not None}
    b_hard = {row_key(r): r["hard"] for r in b_rows if r.get("hard") is not None}
    keys = sorted(a_hard.keys() & b_hard.keys())
    improved = sorted(k for k in keys if b_hard[k] > a_hard[k])
    regressed = sorted(k for k in keys if b_hard[k] < a_hard[k])
    return {
        "pairs": len(keys),
        "both_right": sum(1 for k in keys if a_hard[k] == b_hard[k] == 1),
        "both_wrong": sum(1 for k in keys if a_hard[k] == b_hard[k] == 0),
        "improved": len(improved),
        "regressed": len(regressed),
        "p_value": mcnemar_exact(len(improved), len(regressed)),
        "improved_ids": [f"{i}#{run}" for i, run in improved],
        "regressed_ids": [f"{i}#{run}" for i, run in regressed],
    }


def build_report(named_rows: list[tuple[str, list[dict[str, Any]]]]) -> tuple[dict[str, Any], list[list]]:
    """The report of one input, or several side by side; returns it and the rows it covers.

    Several inputs are compared on the (id, run) rows they all have; the report says how many
    each one left out. Exactly two inputs also get the paired comparison.
    """
    judged = [(name, [r for r in rows if "hard" in r]) for name, rows in named_rows]
    if len(judged) == 1:
        name, rows = judged[0]
        return summarize(rows, name), [rows]
    common = set.intersection(*({row_key(r) for r in rows} for _, rows in judged))
    kept = [[r for r in rows if row_key(r) in common] for _, rows in judged]
    comparison: dict[str, Any] = {
        "common_rows": len(common),
        "common_items": len({item for item, _ in common}),
        "left_out": {name: len(rows) - len(k) for (name, rows), k in zip(judged, kept, strict=True)},
    }
    if len(judged) == 2:
        comparison["paired"] = {"a": judged[0][0], "b": judged[1][0], **paired(kept[0], kept[1])}
    summaries = [summarize(k, name) for (name, _), k in zip(judged, kept, strict=True)]
    return {"inputs": summaries, "comparison": comparison}, kept


def input_names(inputs: tuple[str, ...]) -> list[tuple[str, str]]:
    """(name, path) of each report input: NAME=PATH, or the file's stem ("stdin" for -); names
    made unique (`r`, `r-2`), since the report and its JSON are keyed by them."""
    out: list[tuple[str, str]] = []
    for spec in inputs:
        name, sep, path = spec.partition("=")
        if not (sep and name and not os.path.exists(spec)):
            name, path = ("stdin" if spec == "-" else Path(spec).stem), spec
        taken = {n for n, _ in out}
        unique, k = name, 2
        while unique in taken:
            unique, k = f"{name}-{k}", k + 1
        out.append((unique, path))
    return out


def below(summaries: list[dict[str, Any]], threshold: float) -> list[str]:
    """What a CI gate says of each input whose overall accuracy is below `threshold`
    (a fraction, or a percentage when above 1)."""
    fraction = threshold / 100 if threshold > 1 else threshold
    return [
        f"{s['name']}: overall accuracy {s['overall']['accuracy']} is below --fail-under {fraction:g}"
        for s in summaries
        if (s["overall"]["accuracy"] or 0.0) < fraction
    ]
