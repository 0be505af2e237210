"""What a tracker is sent: a run's options as parameters, and its figures as metrics named the
same way in MLflow and W&B. Group names come from the data (hostile): made safe metric names."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

MAX_NAME = 200
MAX_PARAM = 500


def metric_name(*parts: str) -> str:
    """A name both trackers take: letters, digits and `_-. /` only, bounded."""
    name = "/".join(re.sub(r"[^A-Za-z0-9_\-. ]+", "_", part).strip() or "_" for part in parts)
    return name[:MAX_NAME]


def params_of(options: Mapping[str, Any], leave_out: tuple[str, ...] = ()) -> dict[str, str]:
    """A run's options (already key-free: bv.evaluation.config.options_record) as text parameters,
    each bounded; those in `leave_out` (how it runs, which a re-run may change) left out, as a
    tracker refuses a parameter whose value changes."""
    out: dict[str, str] = {}
    for name, value in options.items():
        if name in leave_out:
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
        out[metric_name(name)] = text[:MAX_PARAM]
    return out


def flat_params(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested settings as one parameter each (`options.gate`, `target.model`), not one JSON blob,
    so that a tracker filters runs by any one of them."""
    out: dict[str, str] = {}
    for name, value in values.items():
        if isinstance(value, Mapping) and value:
            out |= flat_params(value, f"{prefix}{name}.")
        else:
            out |= params_of({f"{prefix}{name}": value})
    return out


def json_sha256(value: Any) -> str:
    """The SHA-256 of a JSON value as sorted, compact JSON (a split's ids, as run.json holds them)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _put(out: dict[str, float], name: str, value: Any) -> None:
    number = _number(value)
    if number is not None:
        out[name] = number


def _figures(out: dict[str, float], prefix: tuple[str, ...], figures: Mapping[str, Any]) -> None:
    name = (lambda key: metric_name(*prefix, key)) if prefix else metric_name
    _put(out, name("accuracy"), figures.get("accuracy"))
    ci = figures.get("ci95") or [None, None]
    _put(out, name("accuracy_ci95_low"), ci[0])
    _put(out, name("accuracy_ci95_high"), ci[1])
    for key in ("n", "rows", "errors", "judge_errors", "undecided"):
        _put(out, name(key), figures.get(key))


def eval_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """A report's figures (bv.reporting.report_types.Summary): overall, by type, subtype and
    answer type, each accuracy with its 95% interval over items; tokens and cost."""
    out: dict[str, float] = {}
    _figures(out, (), summary["overall"])
    for level in ("by_type", "by_subtype", "by_ans_type"):
        for group, figures in summary.get(level, {}).items():
            _figures(out, (level.removeprefix("by_"), group), figures)
    panel = summary.get("judge_panel") or {}
    _put(out, "judge_panel/kappa", panel.get("kappa"))
    _put(out, "judge_panel/disagreements", panel.get("disagreements"))
    checked = summary.get("judge_calibration") or {}
    for key in ("sensitivity", "specificity", "judged_accuracy", "corrected_accuracy"):
        _put(out, f"judge_calibration/{key}", checked.get(key))
    ci = checked.get("corrected_ci95") or [None, None]
    _put(out, "judge_calibration/corrected_ci95_low", ci[0])
    _put(out, "judge_calibration/corrected_ci95_high", ci[1])
    usage = summary.get("usage") or {}
    for key in ("prompt_tokens", "completion_tokens", "cost_usd", "cost_unknown", "latency_s_mean"):
        _put(out, metric_name(key), usage.get(key))
    return out


def _tokens(out: dict[str, float], tokens: Mapping[str, Any]) -> None:
    for role, counts in tokens.items():
        for key in ("requests", "prompt_tokens", "completion_tokens", "cost_usd"):
            _put(out, metric_name(role, key), (counts or {}).get(key))
    for key in ("prompt_tokens", "completion_tokens", "cost_usd"):
        values = [_number((c or {}).get(key)) for c in tokens.values()]
        if any(v is not None for v in values):
            out[metric_name(key)] = sum(v for v in values if v is not None)


def step_metrics(row: Mapping[str, Any], held: Mapping[str, Any] | None) -> dict[str, float]:
    """One history row of `bv optimize` (the seed's, step 0, or a step's): the selection score
    of the skill it leaves (`held`, with its interval), the best so far, the gate's decision,
    its p and difference, and the step's tokens and cost by role."""
    out: dict[str, float] = {}
    if held is not None:
        _put(out, "selection_accuracy", held.get("accuracy"))
        ci = held.get("ci95") or [None, None]
        _put(out, "selection_ci95_low", ci[0])
        _put(out, "selection_ci95_high", ci[1])
    candidate = (row.get("selection") or {}).get("candidate")
    if isinstance(candidate, Mapping):
        _put(out, "candidate_accuracy", candidate.get("accuracy"))
    _put(out, "best_accuracy", (row.get("best") or {}).get("accuracy"))
    _put(out, "train_accuracy", (row.get("train") or {}).get("accuracy"))
    gate = row.get("gate")
    if isinstance(gate, Mapping):
        _put(out, "gate_accepted", bool(gate.get("accepted")))
        _put(out, "gate_p_value", gate.get("p_value"))
        _put(out, "gate_diff", gate.get("diff"))
    for key in ("proposed", "applied"):
        _put(out, f"edits_{key}", row.get(key))
    _tokens(out, row.get("tokens") or {})
    return out


def history_metrics(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """Each history row's metrics (step_metrics), the selection score carried over the steps
    that keep the skill: the seed's, then the candidate's when accepted, the current's when not."""
    held: Mapping[str, Any] | None = None
    out = []
    for row in rows:
        selection = row.get("selection") or {}
        if row.get("kind") == "seed":
            held = selection
        elif "current" in selection:
            held = selection["candidate"] if row.get("accepted") else selection["current"]
        out.append(step_metrics(row, held))
    return out


def test_metrics(test: Mapping[str, Any]) -> dict[str, float]:
    """The final comparison on the test split: the seed's and the best skill's accuracy with
    their intervals, the difference and its p."""
    out: dict[str, float] = {}
    for side in ("seed", "best"):
        figures = test.get(side) or {}
        _put(out, f"test_{side}_accuracy", figures.get("accuracy"))
        ci = figures.get("ci95") or [None, None]
        _put(out, f"test_{side}_ci95_low", ci[0])
        _put(out, f"test_{side}_ci95_high", ci[1])
    comparison = test.get("comparison") or {}
    _put(out, "test_diff", comparison.get("diff"))
    _put(out, "test_p_value", comparison.get("p_value"))
    _put(out, "test_failed_rows", test.get("failed_rows"))
    guard = test.get("guard") or {}
    _put(out, "test_confirmation_p_value", guard.get("p_value"))
    handed = test.get("handed_back") or {}
    _put(out, "handed_back_best", 1.0 if handed.get("skill") == "best" else 0.0)
    gain = handed.get("gain") or {}
    _put(out, "handed_back_gain", gain.get("estimate"))
    ci = gain.get("ci95") or [None, None]
    _put(out, "handed_back_gain_ci95_low", ci[0])
    _put(out, "handed_back_gain_ci95_high", ci[1])
    return out
