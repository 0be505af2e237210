"""Streaming aggregation for `bv report`: a few counters per group and run, one byte per (id, run).

A `Tally` takes judged rows one at a time and keeps no row: per group (overall, type, subtype,
answer type) and run it counts rows, right answers and failures, and a `KeyTable` remembers
each (id, run) it saw with its verdict in one byte, which is all that duplicate checks,
comparisons and the paired test need. Memory grows with the number of items and runs, not
with the size of the rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bv.stats import mean, pstdev, wilson

# One byte per (id, run) in a KeyTable: absent, or present with this verdict.
ABSENT, NO_VERDICT, WRONG, RIGHT = 0, 1, 2, 3
_CODE = {None: NO_VERDICT, 0: WRONG, 1: RIGHT}
_DENSE_RUNS = 1 << 16  # runs 0..65535 live in a bytearray per item; others (rare) in a dict


def chance_of(row: dict[str, Any]) -> float:
    """Expected accuracy of a uniform guess: 1/options for choice items, 0 for blank ones."""
    choices = row.get("choices")
    if row.get("ans_type") == "choice" and choices:
        return 1 / len(choices)
    return 0.0


def failed(row: dict[str, Any]) -> bool:
    """A row that is not finished: a rollout error, a judge error or an undecided verdict."""
    return bool(row.get("error")) or row.get("hard") is None or bool(row.get("undecided"))


class KeyTable:
    """The (id, run) pairs of one column, each with its verdict code, in about a byte each."""

    def __init__(self) -> None:
        self._dense: dict[str, bytearray] = {}
        self._sparse: dict[tuple[str, int], int] = {}
        self.size = 0

    def get(self, item: str, run: int) -> int:
        if 0 <= run < _DENSE_RUNS:
            runs = self._dense.get(item)
            return runs[run] if runs is not None and run < len(runs) else ABSENT
        return self._sparse.get((item, run), ABSENT)

    def add(self, item: str, run: int, hard: int | None) -> bool:
        """Record (item, run); False when it was there already (a duplicate)."""
        if self.get(item, run) != ABSENT:
            return False
        if 0 <= run < _DENSE_RUNS:
            runs = self._dense.setdefault(item, bytearray())
            if run >= len(runs):
                runs.extend(bytes(max(run + 1 - len(runs), len(runs))))
            runs[run] = _CODE[hard]
        else:
            self._sparse[(item, run)] = _CODE[hard]
        self.size += 1
        return True

    def items(self) -> Iterator[tuple[tuple[str, int], int]]:
        """((id, run), code) of every pair present."""
        for item, runs in self._dense.items():
            for run, code in enumerate(runs):
                if code:
                    yield (item, run), code
        yield from self._sparse.items()


class Cell:
    """The counts of one group: per run [rows, right, finished, right among finished]."""

    __slots__ = ("chance", "errors", "items", "judge_errors", "runs", "undecided")

    def __init__(self) -> None:
        self.runs: dict[int, list[int]] = {}
        self.items = 0
        self.chance = 0.0
        self.errors = self.judge_errors = self.undecided = 0

    def add(self, run: int, hard: int | None, row: dict[str, Any], is_failed: bool, chance: float) -> None:
        counts = self.runs.get(run)
        if counts is None:
            counts = self.runs[run] = [0, 0, 0, 0]
        counts[0] += 1
        counts[1] += hard == 1
        if not is_failed:
            counts[2] += 1
            counts[3] += hard == 1
        self.chance += chance
        self.errors += bool(row.get("error"))
        self.judge_errors += row.get("decided_by") == "error"
        self.undecided += bool(row.get("undecided"))

    def figures(self, exclude_failed: bool) -> dict[str, Any]:
        """The cell as the report shows it; the accuracy counts every row unless `exclude_failed`."""
        total, right = (2, 3) if exclude_failed else (0, 1)
        per_run = [c[right] / c[total] for _, c in sorted(self.runs.items()) if c[total]]
        rows = sum(c[0] for c in self.runs.values())
        correct = sum(c[right] for c in self.runs.values())
        denominator = sum(c[total] for c in self.runs.values())
        cell: dict[str, Any] = {
            "n": self.items,
            "rows": rows,
            "finished": sum(c[2] for c in self.runs.values()),
            "runs": len(self.runs),
            "correct": correct,
            "denominator": denominator,
            "accuracy": round(mean(per_run), 6) if per_run else None,
            "std": round(pstdev(per_run), 6) if len(per_run) > 1 else None,
            "per_run": [round(a, 6) for a in per_run],
            "ci95": None,
            "chance": round(self.chance / rows, 6) if rows else None,
            "errors": self.errors,
            "judge_errors": self.judge_errors,
            "undecided": self.undecided,
        }
        if len(self.runs) == 1 and denominator:
            low, high = wilson(correct, denominator)
            cell["ci95"] = [round(low, 6), round(high, 6)]
        return cell


GROUPS = (("by_type", "type"), ("by_subtype", "subtype"), ("by_ans_type", "ans_type"))


@dataclass
class Tally:
    """Everything one report column shows, gathered row by row."""

    keys: KeyTable = field(default_factory=KeyTable)
    overall: Cell = field(default_factory=Cell)
    groups: dict[str, dict[str, Cell]] = field(default_factory=lambda: {g: {} for g, _ in GROUPS})
    item_groups: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    subtype_type: dict[str, str] = field(default_factory=dict)
    usage: list[float] = field(
        default_factory=lambda: [0, 0, 0.0, 0, 0]
    )  # prompt, completion, latency, n, unboxed
    seen: dict[str, set[Any]] = field(
        default_factory=dict
    )  # distinct values: model, endpoint, bv_version, ...
    started: list[str] = field(default_factory=list)  # [first, last] started_at

    def add(self, row: dict[str, Any], item: str, run: int) -> bool:
        """Count one judged row; False (and nothing counted) when its (id, run) was seen already."""
        hard = row.get("hard")
        if not self.keys.add(item, run, hard):
            return False
        groups = self.item_groups.get(item)
        new_item = groups is None
        if new_item:
            groups = tuple(str(row.get(name) or "unknown") for _, name in GROUPS)
            self.item_groups[item] = groups  # an item stays in the groups of its first row
            self.subtype_type.setdefault(groups[1], groups[0])
            self.overall.items += 1
        is_failed, chance = failed(row), chance_of(row)
        self.overall.add(run, hard, row, is_failed, chance)
        for (group, _), label in zip(GROUPS, groups, strict=True):
            cell = self.groups[group].get(label)
            if cell is None:
                cell = self.groups[group][label] = Cell()
            cell.items += new_item
            cell.add(run, hard, row, is_failed, chance)
        self._add_usage(row)
        return True

    def _add_usage(self, row: dict[str, Any]) -> None:
        usage = row.get("usage")
        if isinstance(usage, dict):
            self.usage[0] += usage.get("prompt_tokens") or 0
            self.usage[1] += usage.get("completion_tokens") or 0
        latency = row.get("latency_s")
        if isinstance(latency, (int, float)) and not isinstance(latency, bool):
            self.usage[2] += latency
            self.usage[3] += 1
        if "response" in row and not row.get("error"):  # replies only: a failed rollout has none
            if "extracted" in row:  # what bv judge found; the same test as has_answer, done once
                self.usage[4] += row["extracted"] is None
            else:
                from bv.extract import has_answer

                self.usage[4] += not has_answer(row.get("response"))
        for name in ("model", "endpoint", "bv_version"):
            value = row.get(name)
            if value is not None and len(self.seen.setdefault(name, set())) < 20:
                self.seen[name].add(str(value))
        started = row.get("started_at")
        if isinstance(started, str):
            if not self.started:
                self.started = [started, started]
            else:
                self.started = [min(self.started[0], started), max(self.started[1], started)]

    def summary(self, name: str, exclude_failed: bool = False) -> dict[str, Any]:
        """The figures of this column, in the report's JSON shape."""
        summary: dict[str, Any] = {"name": name, "overall": self.overall.figures(exclude_failed)}
        for group, _ in GROUPS:
            cells = self.groups[group]
            summary[group] = {label: cells[label].figures(exclude_failed) for label in sorted(cells)}
        for subtype, cell in summary["by_subtype"].items():
            cell["type"] = self.subtype_type[subtype]
        summary["accuracy_over"] = "finished rows (--exclude-failed)" if exclude_failed else "all rows"
        summary["models"] = sorted(self.seen.get("model", ()))
        summary["provenance"] = {
            "endpoints": sorted(self.seen.get("endpoint", ())),
            "bv_versions": sorted(self.seen.get("bv_version", ())),
            "started_at": {"first": self.started[0], "last": self.started[1]} if self.started else None,
        }
        summary["usage"] = {
            "prompt_tokens": self.usage[0],
            "completion_tokens": self.usage[1],
            "latency_s_mean": round(self.usage[2] / self.usage[3], 3) if self.usage[3] else None,
            "unboxed": self.usage[4],
        }
        return summary
