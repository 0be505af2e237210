"""Streaming aggregation for `bv report`: a few counters per group and run, one byte per (id, run).

A `Tally` takes judged rows one at a time and keeps no row: per group (overall, type, subtype,
answer type) it counts rows, right answers and failures, and a `KeyTable` remembers each (id,
run) it saw with its verdict in one byte, which is all that duplicate checks, comparisons, the
paired test and each run's accuracy need. The runs' accuracies (Avg@k ± std) are worked out at
the end from that table, one run at a time, so beside its byte per (id, run) the tally holds a
few numbers per group and item, however many runs there are (12 items × 50k runs once held 308
MB, a count per group and run).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from bv.core.records import JudgedRow
from bv.core.shards import ShardTally
from bv.core.stats import ItemEstimate, estimate_over_items
from bv.reporting.costs import row_cost_units, usd
from bv.reporting.judges import JudgeTally
from bv.reporting.key_table import KeyTable
from bv.reporting.report_types import Figures, ShardsSeen, SubtypeFigures, Summary


def reply_flags(get: Callable[[str], Any]) -> int:
    """A row's REPLY_FLAGS as bits (`get` is row.get): a refusal, a content filter's stop, a
    cut-off, an answer only in the reasoning."""
    flags = 0
    if get("refusal"):
        flags |= 1
    if get("content_filter"):
        flags |= 2
    if get("cut_off") is True:
        flags |= 4
    if isinstance(get("reasoning_answer"), str):
        flags |= 8
    return flags


def chance_of(row: JudgedRow) -> float:
    """Expected accuracy of a uniform guess: 1/options for choice items, 0 for blank ones."""
    choices = row.get("choices")
    if choices and choices.__class__ is list and row.get("ans_type") == "choice":
        return 1 / len(choices)
    return 0.0


class Spread:
    """One group's accuracy run by run, folded in run order as the runs come (bv.reporting.
    key_table's run_counts): the runs with a row, the runs the accuracy counts, their sum and
    squared deviations (Welford), and with `keep` each run's accuracy (the JSON's `per_run`)."""

    __slots__ = ("_m2", "_mean", "counted", "keep", "runs", "total", "values")

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.runs = self.counted = 0
        self.total = self._mean = self._m2 = 0.0
        self.values: list[float] = []

    def add(self, rows: int, counted: int, right: int) -> None:
        """One run's rows of this group, how many the accuracy counts, and how many were right."""
        if not rows:
            return
        self.runs += 1
        if not counted:
            return
        accuracy = right / counted
        self.counted += 1
        self.total += accuracy
        delta = accuracy - self._mean
        self._mean += delta / self.counted
        self._m2 += delta * (accuracy - self._mean)
        if self.keep:
            self.values.append(accuracy)

    def accuracy(self) -> float | None:
        return self.total / self.counted if self.counted else None

    def std(self) -> float | None:
        """The population standard deviation over runs, as the official compute_score.py reports."""
        return math.sqrt(max(self._m2, 0.0) / self.counted) if self.counted > 1 else None


class Cell:
    """The counts of one group: [rows, right, finished, right among finished]; and the rows whose
    reply was a refusal, was filtered, was cut off, or had its answer only in the reasoning
    (REPLY_FLAGS, in `replies`). Its runs' accuracies are its `spread`."""

    __slots__ = ("chance", "counts", "errors", "items", "judge_errors", "replies", "spread", "undecided")

    def __init__(self, keep_runs: bool = True) -> None:
        self.counts = [0, 0, 0, 0]
        self.spread = Spread(keep_runs)
        self.items = 0
        self.chance = 0.0
        self.errors = self.judge_errors = self.undecided = 0
        self.replies = [0] * len(REPLY_FLAGS)

    def add(self, kind: tuple[int | None, bool, bool, bool, float, int], count: int) -> None:
        """Count `count` rows of one kind: (hard, rollout error, judge error, undecided, chance,
        reply flags: bit k for REPLY_FLAGS[k])."""
        hard, error, judge_error, undecided, chance, flags = kind
        if flags:
            for bit in range(len(REPLY_FLAGS)):
                self.replies[bit] += count if flags >> bit & 1 else 0
        counts = self.counts
        right = count if hard == 1 else 0
        counts[0] += count
        counts[1] += right
        if not (error or hard is None or undecided):
            counts[2] += count
            counts[3] += right
        self.chance += chance * count
        self.errors += count if error else 0
        self.judge_errors += count if judge_error else 0
        self.undecided += count if undecided else 0

    def figures(self, exclude_failed: bool, estimate: ItemEstimate | None = None) -> Figures:
        """The cell as the report shows it; the accuracy counts every row unless `exclude_failed`
        (as its `spread` was counted).

        `estimate` is the cell's accuracy over items (bv.core.stats), its interval and SE."""
        rows, right, finished, right_finished = self.counts
        accuracy, std = self.spread.accuracy(), self.spread.std()
        cell: Figures = {
            "n": self.items,
            "rows": rows,
            "finished": finished,
            "runs": self.spread.runs,
            "correct": right_finished if exclude_failed else right,
            "denominator": finished if exclude_failed else rows,
            "accuracy": round(accuracy, 6) if accuracy is not None else None,
            "std": round(std, 6) if std is not None else None,
            "per_run": [round(a, 6) for a in self.spread.values],
            "item_accuracy": None,
            "se": None,
            "ci95": None,
            "chance": round(self.chance / rows, 6) if rows else None,
            "errors": self.errors,
            "judge_errors": self.judge_errors,
            "undecided": self.undecided,
            "refusals": self.replies[0],
            "content_filtered": self.replies[1],
            "cut_off": self.replies[2],
            "answer_in_reasoning": self.replies[3],
        }
        if estimate is not None and estimate.n_items:
            cell["item_accuracy"] = round(estimate.mean, 6)
            cell["se"] = None if math.isnan(estimate.se) else round(estimate.se, 6)
            cell["ci95"] = [round(estimate.ci95[0], 6), round(estimate.ci95[1], 6)]
        return cell


GROUPS = (("by_type", "type"), ("by_subtype", "subtype"), ("by_ans_type", "ans_type"))
# What a row's reply was, beside right or wrong: the row fields that say it, in the bit order of
# a kind's flags (Figures: refusals, content_filtered, cut_off, answer_in_reasoning).
REPLY_FLAGS = ("refusal", "content_filter", "cut_off", "reasoning_answer")
# shown per input, up to _MAX_SEEN values each
_SEEN = ("model", "endpoint", "bv_version", "backend", "judge_model", "params")
_MAX_SEEN = 20
# Latencies are summed in whole tenths of a millisecond (rows record them to 4 decimals), so a
# merged, sharded or reordered input gives the same mean; a value outside [0, MAX_LATENCY_S) is
# not a latency and is left out of the mean.
LATENCY_UNITS = 10_000
MAX_LATENCY_S = 1e7


@dataclass
class Tally:
    """Everything one report column shows, gathered row by row.

    Rows are counted by kind (the item's groups, verdict, failures, chance level; not the run, so
    the kinds are bounded by the items) in one dict, spread into the cells of each group only
    when the summary is asked for: one dict update per row rather than four cells.
    """

    keys: KeyTable = field(default_factory=KeyTable)
    kinds: dict[tuple[Any, ...], int] = field(default_factory=dict)
    item_groups: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    items: dict[tuple[int, str], int] = field(default_factory=dict)  # (group index, label) -> items
    # prompt tokens, completion tokens, latency sum, rows with a latency, replies without an answer,
    # cost (bv.reporting.costs' units), rows of a known cost, rows of an unknown one
    usage: list[float] = field(default_factory=lambda: [0, 0, 0.0, 0, 0, 0, 0, 0])
    seen: dict[str, set[Any]] = field(default_factory=lambda: {n: set() for n in _SEEN})
    started: list[str] = field(default_factory=list)  # [first, last] started_at
    shards: ShardTally = field(default_factory=ShardTally)  # the rows' `shard` (bv rollout --shard)
    judges: JudgeTally = field(default_factory=JudgeTally)  # a panel's verdicts (bv.reporting.judges)
    _last_seen: tuple[Any, ...] = ()  # the _SEEN values of the row before

    def add(self, row: JudgedRow, item: str, run: int) -> bool:
        """Count one judged row; False (and nothing counted) when its (id, run) was seen already."""
        get: Callable[[str], Any] = row.get  # bound once: this runs for every row
        hard = get("hard")
        error = get("error")
        undecided = bool(get("undecided"))
        if not self.keys.add(item, run, hard, undecided or bool(error)):
            return False
        groups = self.item_groups.get(item)
        if groups is None:
            labels = [str(get(name) or "unknown") for _, name in GROUPS]
            groups = self.item_groups[item] = (labels[0], labels[1], labels[2])
            for index, label in enumerate(groups):  # an item stays in the groups of its first row
                self.items[index, label] = self.items.get((index, label), 0) + 1
        kind = (
            groups,
            hard,
            bool(error),
            get("decided_by") == "error",
            undecided,
            chance_of(row) if get("ans_type") == "choice" else 0.0,
            reply_flags(get),
        )
        kinds = self.kinds
        kinds[kind] = kinds.get(kind, 0) + 1
        self._add_usage(row, get, error)
        if (
            "judge_panel" in row
            or "judge_calibration" in row
            or (kind[3] is False and get("decided_by") == "llm")
        ):
            self.judges.add(get, item, run)
        return True

    def cells(
        self, exclude_failed: bool = False, keep_runs: bool = True
    ) -> tuple[Cell, dict[str, dict[str, Cell]], dict[str, int]]:
        """The overall cell and the cells of each group, from the counts by kind, their runs'
        accuracies from the key table run by run; and how many items each run covers."""
        overall = Cell(keep_runs)
        groups: dict[str, dict[str, Cell]] = {group: {} for group, _ in GROUPS}
        overall.items = len(self.item_groups)
        for (labels, *kind), count in self.kinds.items():
            overall.add(tuple(kind), count)
            for (group, _), label in zip(GROUPS, labels, strict=True):
                cell = groups[group].get(label)
                if cell is None:
                    cell = groups[group][label] = Cell(keep_runs)
                cell.add(tuple(kind), count)
        for index, (group, _) in enumerate(GROUPS):
            for label, cell in groups[group].items():
                cell.items = self.items[index, label]
        # items of the same groups are counted together (a slot), each slot into its four cells
        every = [overall, *(cell for cells in groups.values() for cell in cells.values())]
        place = {
            (group, label): i
            for i, (group, label) in enumerate(
                (group, label) for group, cells in groups.items() for label in cells
            )
        }
        slots: dict[tuple[str, str, str], int] = {}
        slot_of = {item: slots.setdefault(labels, len(slots)) for item, labels in self.item_groups.items()}
        cells_of = [
            [0, *(1 + place[group, label] for (group, _), label in zip(GROUPS, labels, strict=True))]
            for labels in slots
        ]
        items_per_run: dict[str, int] = {}
        for run, rows, counted, right in self.keys.run_counts(slot_of, len(slots), exclude_failed):
            sums = [[0, 0, 0] for _ in every]
            for slot, cells in enumerate(cells_of):
                if rows[slot]:
                    for at in cells:
                        total = sums[at]
                        total[0] += rows[slot]
                        total[1] += counted[slot]
                        total[2] += right[slot]
            for cell, (n, counted_rows, right_rows) in zip(every, sums, strict=True):
                cell.spread.add(n, counted_rows, right_rows)
            items_per_run[str(run)] = sums[0][0]
        return overall, groups, items_per_run

    def _add_usage(self, row: JudgedRow, get: Callable[[str], Any], error: Any) -> None:
        """Tokens, latency, unboxed replies, provenance (`get` is row.get, `error` the row's)."""
        usage = self.usage
        tokens = get("usage")
        if tokens.__class__ is dict:
            count = tokens.get("prompt_tokens")
            if count.__class__ is int:
                usage[0] += count
            count = tokens.get("completion_tokens")
            if count.__class__ is int:
                usage[1] += count
        latency = get("latency_s")
        if (latency.__class__ is float or latency.__class__ is int) and 0 <= latency < MAX_LATENCY_S:
            usage[2] += round(latency * LATENCY_UNITS)  # whole units: the sum is the same in any order
            usage[3] += 1
        if not error and "response" in row:  # replies only: a failed rollout has none
            if "extracted" in row:  # what bv judge found; the same test as has_answer, done once
                usage[4] += row["extracted"] is None
            else:
                from bv.core.extract import has_answer

                usage[4] += not has_answer(get("response"))
        cost = row_cost_units(get)
        if cost is None:
            usage[7] += 1
        else:
            usage[5] += cost
            usage[6] += 1
        # _SEEN, mostly as in the row before
        made = (
            get("model"),
            get("endpoint"),
            get("bv_version"),
            get("backend"),
            get("judge_model"),
            get("params"),
        )
        if made != self._last_seen:
            self._last_seen = made
            for name, value in zip(_SEEN, made, strict=True):
                values = self.seen[name]
                if value is not None:
                    text = value if value.__class__ is str else json.dumps(value, sort_keys=True, default=str)
                    if text not in values and len(values) < _MAX_SEEN:
                        values.add(text)
        self.shards.add(get("shard"))
        started = get("started_at")
        if started.__class__ is str:
            if not self.started:
                self.started = [started, started]
            elif started < self.started[0]:
                self.started[0] = started
            elif started > self.started[1]:
                self.started[1] = started

    def item_scores(self, exclude_failed: bool = False) -> dict[str, tuple[int, int]]:
        """item -> (right runs, counted runs), for items with a run that counts."""
        return {item: (right, n) for item, right, n in self.keys.item_counts(exclude_failed) if n}

    def estimates(
        self, exclude_failed: bool, cluster: str | None = None
    ) -> tuple[ItemEstimate, dict[tuple[int, str], ItemEstimate]]:
        """Accuracy over items, overall and per (group index, label), in one pass over the items.

        `cluster` ("type" or "subtype") clusters the standard errors of the groups above it."""
        at = next((i for i, (_, name) in enumerate(GROUPS) if name == cluster), None)
        values: dict[tuple[int, str], tuple[list[float], list[str], list[int]]] = {}
        everything: tuple[list[float], list[str], list[int]] = ([], [], [])
        one_run = True
        for item, (right, n) in self.item_scores(exclude_failed).items():
            score = right / n
            one_run = one_run and n == 1
            labels = self.item_groups[item]
            key = labels[at] if at is not None else item
            everything[0].append(score)
            everything[1].append(key)
            everything[2].append(n)
            for index, label in enumerate(labels):
                lists = values.get((index, label))
                if lists is None:
                    lists = values[index, label] = ([], [], [])
                lists[0].append(score)
                lists[1].append(key)
                lists[2].append(n)

        def estimate(lists: tuple[list[float], list[str], list[int]]) -> ItemEstimate:
            clustered = at is not None and len(set(lists[1])) > 1  # a group inside one cluster: not
            return estimate_over_items(
                lists[0], one_run=one_run, clusters=lists[1] if clustered else None, rows=sum(lists[2])
            )

        return estimate(everything), {key: estimate(lists) for key, lists in values.items()}

    def summary(
        self, name: str, exclude_failed: bool = False, cluster: str | None = None, per_run: bool = True
    ) -> Summary:
        """The figures of this column, in the report's JSON shape (bv.reporting.report_types);
        each group's `per_run` accuracies listed only with `per_run` (the JSON's, one number per
        group and run: what a report of many runs would hold otherwise)."""
        overall, groups, items_per_run = self.cells(exclude_failed, per_run)
        whole, estimates = self.estimates(exclude_failed, cluster)
        by = {
            group: {
                label: cells[label].figures(exclude_failed, estimates.get((index, label)))
                for label in sorted(cells)
            }
            for index, (group, cells) in enumerate(groups.items())
        }
        subtype_type: dict[str, str] = {}
        for type_name, subtype, _ in self.item_groups.values():
            subtype_type.setdefault(subtype, type_name)
        by_subtype: dict[str, SubtypeFigures] = {
            subtype: {**cell, "type": subtype_type[subtype]} for subtype, cell in by["by_subtype"].items()
        }
        summary: Summary = {
            "name": name,
            "overall": overall.figures(exclude_failed, whole),
            "interval": f"95% interval over items ({whole.method}"
            + (f", clustered by {cluster})" if cluster else ")"),
            "items_per_run": items_per_run,
            "complete": all(count == overall.items for count in items_per_run.values()),
            "by_type": by["by_type"],
            "by_subtype": by_subtype,
            "by_ans_type": by["by_ans_type"],
            "accuracy_over": "finished rows (--exclude-failed)" if exclude_failed else "all rows",
            "models": sorted(self.seen.get("model", ())),
            "provenance": {
                "endpoints": sorted(self.seen.get("endpoint", ())),
                "bv_versions": sorted(self.seen.get("bv_version", ())),
                "backends": sorted(self.seen.get("backend", ())),
                "params": sorted(self.seen.get("params", ())),
                "judge_models": sorted(self.seen.get("judge_model", ())),
                "started_at": {"first": self.started[0], "last": self.started[1]} if self.started else None,
            },
            "usage": {  # token and reply counts: sums of ints
                "prompt_tokens": cast(int, self.usage[0]),
                "completion_tokens": cast(int, self.usage[1]),
                "latency_s_mean": round(self.usage[2] / self.usage[3] / LATENCY_UNITS, 3)
                if self.usage[3]
                else None,
                "unboxed": cast(int, self.usage[4]),
                "cost_usd": usd(cast(int, self.usage[5])) if self.usage[6] else None,
                "cost_unknown": cast(int, self.usage[7]),
            },
        }
        shards = self.shards.as_json()
        if shards is not None:
            summary["provenance"]["shards"] = cast(ShardsSeen, shards)
        panel, calibration = self.judges.summary(), self.judges.calibration()
        if panel is not None:
            summary["judge_panel"] = panel
        if calibration is not None:
            summary["judge_calibration"] = calibration
        return summary
