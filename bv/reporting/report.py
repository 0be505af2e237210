"""`bv report`: accuracy overall and by type, subtype and answer type, read as a stream.

With several runs (`run` 0..K-1) the accuracy is the paper's Avg@k: the mean over runs of
each run's accuracy, with the population standard deviation over runs (run-to-run spread), as
the official compute_score.py does; its 95% interval is over items (bv.core.stats), each item's
score its mean over runs. Inputs compare per item (bv.reporting.compare). The accuracy counts every row:
a rollout error, a judge error and an undecided row are not correct (the official protocol
judges a failed call false), and each is also counted in its own column. `--exclude-failed`
gives the accuracy over finished rows only, labelled so.

A report never pools what should not be pooled: an input that is empty, holds rows that are
not judged rows, repeats an (id, run), or mixes models, skills or judge versions is refused
(`--by` splits such a file into columns). Nothing is kept per row but a byte (bv.reporting.tally).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from bv.core.errors import BadRecord, Fatal
from bv.core.records import JudgedRow, judged_key, row_key
from bv.core.stats import ADJUSTMENT_NAMES
from bv.reporting.compare import compare, differences, notices, power
from bv.reporting.key_table import KeyTable
from bv.reporting.report_types import Built, Comparison, ReportData, Summary
from bv.reporting.tally import Tally, chance_of

__all__ = [
    "BY_FIELDS",
    "CompareOptions",
    "build_report",
    "chance_of",
    "input_names",
    "notices",
    "summarize",
]

# What makes two rows' verdicts not poolable: who answered, with which skill, prompt layout and
# replaced templates, and who judged. `prompts` is the replaced templates of every stage.
BY_FIELDS = ("model", "skill", "style", "prompts", "judge_version")
_TEMPLATE_FIELDS = ("templates", "rollout_templates", "judge_templates")
_MADE_BY_FIELDS = ("model", "skill", "style", "judge_version", *_TEMPLATE_FIELDS)  # made_by_of's
_PLURALS = {
    "model": "models",
    "skill": "skills",
    "style": "prompt styles",
    "prompts": "sets of replaced prompt templates",
    "judge_version": "judge versions",
}
_SHOWN_DUPLICATES = 5


def made_by_of(get: Callable[[str], Any]) -> tuple[Any, ...]:
    """How a row was made, as far as pooling goes: the values of _MADE_BY_FIELDS, in its order,
    in one tuple made without a loop (`get` is row.get; this runs for every row)."""
    return (
        get("model"),
        get("skill"),
        get("style"),
        get("judge_version"),
        get("templates"),
        get("rollout_templates"),
        get("judge_templates"),
    )


def by_value(row: Mapping[str, Any], name: str) -> str:
    """How a row's model, skill, style, replaced prompts or judge version is named in messages and columns."""
    if name == "style":
        return str(row.get("style") or "bv")
    if name == "prompts":
        replaced = {}
        for field_name in _TEMPLATE_FIELDS:
            if isinstance(row.get(field_name), dict):
                replaced.update(row[field_name])
        if not replaced:
            return "bv's own"
        return ",".join(f"{template}@{str(sha)[:8]}" for template, sha in sorted(replaced.items()))
    value = row.get(name)
    if name == "skill":
        if not value:
            return "no skill"
        if isinstance(value, dict):
            return f"{value.get('name')}@{str(value.get('sha256'))[:8]}"
    return "none" if value is None else str(value)


def _judged_key(where: Any, record: dict[str, Any]) -> tuple[str, int]:
    """The (id, run) of a judged row, checked; an error naming the file when the record is an
    item or a rollout row."""
    if "hard" not in record:
        kind = "a rollout row" if "run" in record or "response" in record else "not a judged row (an item?)"
        raise Fatal(
            f"{where}: {kind}: bv report reads judged rows, the output of bv judge"
            " (bv prompt ... | bv rollout ... | bv judge > results.jsonl)"
        )
    return judged_key(record)


def _as_is(record: dict[str, Any]) -> dict[str, Any]:
    return record  # checked by _judged_key, which names a file of rows that are not judged rows


@dataclass(eq=False)
class Input:
    """One report input: a name, and where its rows come from (a path, "-" for stdin, or a list)."""

    name: str
    path: str
    rows: list[dict[str, Any]] | None = None  # given in-process (tests, library use)
    spool: Path | None = None  # stdin's good rows, kept for a second pass
    several: bool = False  # one of several inputs: --by columns are named INPUT:VALUE
    image_root: Path | None = None  # a run folder's images (its items' folder), for the HTML page
    by_rules: bool = False  # a run folder judged by the rules alone (`--mode rules`): no LLM wanted
    unconfirmed: str | None = None  # a run folder whose rows are not those its own record describes

    def close(self) -> None:
        """Remove stdin's spool file, once nothing reads the rows again."""
        if self.spool is not None:
            self.spool.unlink(missing_ok=True)
            self.spool = None

    def read(self, problems: Any, first: bool) -> Iterator[tuple[Any, dict[str, Any]]]:
        """(where, record) for every line that parses; bad lines are reported on the first pass only."""
        if self.rows is not None:
            yield from ((f"{self.name}:{n}", record) for n, record in enumerate(self.rows, 1))
            return
        from bv.core.jsonl import Problems, read_records

        # fast: parsed by orjson where it reads as json does (bv.core.jsonl)
        if first:
            yield from read_records([self.path], problems, _as_is, fast=True)
            return
        quiet = Problems(stream=open(os.devnull, "w"))
        try:
            yield from read_records([str(self.spool) if self.spool else self.path], quiet, _as_is, fast=True)
        finally:
            quiet.stream.close()


@dataclass
class Column:
    """One column of the report: an input, or one model (skill, judge version) of it with --by."""

    name: str
    tally: Tally = field(default_factory=Tally)
    values: dict[str, dict[str, int]] = field(default_factory=dict)  # field -> its values here
    made_by: tuple[Any, ...] | None = None  # how the last row was made (see BY_FIELDS)
    duplicates: list[str] = field(default_factory=list)
    duplicate_count: int = 0


def _read_input(
    source: Input, problems: Any, by: tuple[str, ...], spool_stdin: bool
) -> dict[tuple[str, ...], Column]:
    """First pass over one input: tally it into columns (one, or one per --by value) and check it."""
    columns: dict[tuple[str, ...], Column] = {}
    spool = None
    if source.path == "-" and spool_stdin and source.rows is None:
        import tempfile  # only for stdin: a report of files starts without it

        spool = tempfile.NamedTemporaryFile("w", prefix="bv-report-", suffix=".jsonl", delete=False)
        source.spool = Path(spool.name)
    try:
        for where, record in source.read(problems, first=True):
            try:
                item, run = _judged_key(where, record)
            except BadRecord as exc:
                problems.report(where, str(exc))
                continue
            row = cast(JudgedRow, record)
            value = tuple(by_value(row, name) for name in by) if by else ()
            column = columns.get(value)
            if column is None:
                label = "/".join(value)
                name = (f"{source.name}:{label}" if source.several else label) if by else source.name
                column = columns[value] = Column(name)
            made_by = made_by_of(row.get)
            if made_by != column.made_by:  # a first row, or another model, skill, prompt or judge
                column.made_by = made_by
                for name in BY_FIELDS:
                    if name not in by:
                        column.values.setdefault(name, {}).setdefault(by_value(row, name), 0)
            if not column.tally.add(row, item, run):
                column.duplicate_count += 1
                if len(column.duplicates) < _SHOWN_DUPLICATES:
                    column.duplicates.append(f"id {item} run {run} ({where})")
                continue
            if spool is not None:
                spool.write(json.dumps(row) + "\n")
    finally:
        if spool is not None:
            spool.close()
    _check_input(source, columns, by)
    return dict(sorted(columns.items()))


def _check_input(source: Input, columns: dict[tuple[str, ...], Column], by: tuple[str, ...]) -> None:
    """Refuse what would pool or double-count: an empty input, repeats, mixed models or judges."""
    where = "stdin" if source.path == "-" else source.path
    if not columns:
        raise Fatal(f"{where}: no judged rows (empty input, or no line could be read): nothing to report")
    for column in columns.values():
        for name, values in column.values.items():
            if len(values) > 1:
                shown = ", ".join(sorted(values)[:5]) + (", …" if len(values) > 5 else "")
                raise Fatal(
                    f"{where}: rows of {len(values)} {_PLURALS[name]} ({shown}) in one input;"
                    f" one accuracy would pool them. Report them side by side with `by` {name}"
                    " (or give one file each)"
                )
        if column.duplicate_count:
            raise Fatal(
                f"{where}: {column.duplicate_count} row(s) repeat an (id, run) seen before in this input,"
                f" first: {', '.join(column.duplicates)}; counting both would count them twice."
                " Combine runs and shards with bv merge (one row per (id, run), a later file winning)"
            )


def _tally_of(rows: Tally | Iterable[dict[str, Any]]) -> Tally:
    if isinstance(rows, Tally):
        return rows
    tally = Tally()
    for row in rows:
        if "hard" in row:
            tally.add(cast(JudgedRow, row), *row_key(row))
    return tally


def summarize(rows: Iterable[dict[str, Any]], name: str = "results", exclude_failed: bool = False) -> Summary:
    """Every figure the report shows for one set of judged rows (rows without `hard` are skipped),
    with how they were made (`made_by`) as far as the rows agree on it."""
    judged = [row for row in rows if "hard" in row]
    summary = _tally_of(judged).summary(name, exclude_failed)
    made_by = {}
    for field_name in BY_FIELDS[1:]:  # model is in `models`
        values = {by_value(row, field_name) for row in judged}
        if len(values) == 1:
            made_by[field_name] = values.pop()
    summary["provenance"]["made_by"] = made_by
    return summary


@dataclass(eq=False)
class ColumnRows:
    """The judged rows of one column, read again from its input each time they are iterated:
    what the HTML viewer reads (twice) without the report holding them."""

    source: Input
    value: tuple[str, ...]
    by: tuple[str, ...]
    tables: list[KeyTable]  # the rows every column has, when columns are compared

    def __iter__(self) -> Iterator[JudgedRow]:
        for where, record in self.source.read(None, first=False):
            try:
                item, run = _judged_key(where, record)
            except BadRecord:
                continue  # reported on the first pass
            row = cast(JudgedRow, record)
            if self.by and tuple(by_value(row, name) for name in self.by) != self.value:
                continue
            if all(t.get(item, run) for t in self.tables):
                yield row


def build_report(
    inputs: list[Input] | list[tuple[str, list[dict[str, Any]]]],
    problems: Any = None,
    by: tuple[str, ...] = (),
    exclude_failed: bool = False,
    keep_rows: bool = False,
    options: CompareOptions | None = None,
) -> tuple[Built, list[ColumnRows] | None]:
    """The report of one column, or several side by side; and, with `keep_rows`, each column's
    rows (read again from the inputs when iterated: close the inputs after).

    Several columns are compared on the (id, run) rows they all have (a second pass over the
    inputs when they differ); the report says how many each one left out, and each column but
    the baseline is compared with it per item (bv.reporting.compare).
    """
    from bv.core.jsonl import Problems

    options = options or CompareOptions()

    problems = problems if problems is not None else Problems()
    sources = [s if isinstance(s, Input) else Input(s[0], s[0], rows=list(s[1])) for s in inputs]
    columns: list[Column] = []
    owner: list[tuple[Input, tuple[str, ...]]] = []
    done = False
    try:
        for source in sources:
            source.several = len(sources) > 1
            read = _read_input(source, problems, by, len(sources) > 1 or keep_rows)
            columns += read.values()
            owner += [(source, value) for value in read]
        tables = [c.tally.keys for c in columns] if len(columns) > 1 else []
        rows = [ColumnRows(source, value, by, tables) for source, value in owner] if keep_rows else None
        report: Built
        if len(columns) == 1:
            report = _summary(columns[0], columns[0].tally, exclude_failed, options)
            if options.power:
                report = {
                    "inputs": [report],
                    "comparison": None,
                    "power": power([columns[0].name], [columns[0].tally]),
                }
        else:
            report = _compare(columns, owner, by, exclude_failed, options)
        done = True
        return report, rows
    finally:
        if not (done and keep_rows):
            for source in sources:
                source.close()


@dataclass(frozen=True)
class CompareOptions:
    """How inputs are compared and summed up: `bv report --baseline/--adjust/--cluster/--power`."""

    baseline: str | None = None  # an input's name; the first by default
    adjust: str = "holm"  # or "bh" (bv.core.stats.ADJUSTMENTS)
    cluster: str | None = None  # "type" or "subtype": clustered SEs of the accuracies and differences
    power: bool = False
    per_run: bool = True  # each group's accuracy per run listed (the JSON's `per_run`), one number a run


def _summary(column: Column, tally: Tally, exclude_failed: bool, options: CompareOptions) -> Summary:
    """A column's summary, with how its rows were made (skill, style, prompts, judge version)."""
    summary = tally.summary(column.name, exclude_failed, options.cluster, options.per_run)
    made_by = {
        name: next(iter(values)) for name, values in column.values.items() if name != "model" and values
    }
    summary["provenance"]["made_by"] = made_by
    return summary


def _compare(
    columns: list[Column],
    owner: list[tuple[Input, tuple[str, ...]]],
    by: tuple[str, ...],
    exclude_failed: bool,
    options: CompareOptions,
) -> ReportData:
    names = [c.name for c in columns]
    if options.baseline is not None and options.baseline not in names:
        raise Fatal(f"`baseline` {options.baseline}: no input of that name (inputs: {', '.join(names)})")
    baseline = names.index(options.baseline) if options.baseline is not None else 0
    tables = [c.tally.keys for c in columns]
    smallest = min(tables, key=lambda t: t.size)
    common_items: set[str] = set()
    common = 0
    for (item, run), _ in smallest.items():
        if all(t.get(item, run) for t in tables):
            common += 1
            common_items.add(item)
    left_out = {c.name: c.tally.keys.size - common for c in columns}
    final = [c.tally for c in columns]
    if any(left_out.values()):  # a second pass, counting only the rows every column has
        final = [Tally() for _ in columns]
        for i, (source, value) in enumerate(owner):
            for row in ColumnRows(source, value, by, tables):
                final[i].add(row, *row_key(row))
    summaries = [_summary(c, t, exclude_failed, options) for c, t in zip(columns, final, strict=True)]
    pairs = compare(
        names, final, baseline, exclude_failed=exclude_failed, adjust=options.adjust, cluster=options.cluster
    )
    comparison: Comparison = {
        "common_rows": common,
        "common_items": len(common_items),
        "left_out": left_out,
        "items": {c.name: len(c.tally.item_groups) for c in columns},
        "baseline": names[baseline],
        "adjustment": f"{ADJUSTMENT_NAMES[options.adjust]}, over the groups of each level"
        + (f" and over the {len(pairs)} comparisons overall" if len(pairs) > 1 else ""),
        "pairs": pairs,
        "differs": differences(summaries),
    }
    if len(pairs) == 1:
        comparison["paired"] = pairs[0]
    plans = power(names, final, baseline, exclude_failed) if options.power else None
    return {"inputs": summaries, "comparison": comparison, "power": plans}


def input_names(inputs: tuple[str, ...]) -> list[Input]:
    """Each report input: NAME=PATH, a run folder (named after its run, its images found from its
    config: bv.core.run_inputs), or a file named by its stem ("stdin" for -); names made unique
    (`r`, `r-2`), since the report and its JSON are keyed by them."""
    from bv.core.run_inputs import run_folder

    out: list[Input] = []
    for spec in inputs:
        name, sep, path = spec.partition("=")
        if not (sep and name and not os.path.exists(spec)):
            name, path = ("stdin" if spec == "-" else Path(spec).stem), spec
            sep = ""
        run = run_folder(path)
        if run is not None:
            name, path = (name if sep else run.name), run.results
        taken = {source.name for source in out}
        unique, k = name, 2
        while unique in taken:
            unique, k = f"{name}-{k}", k + 1
        if run is None:
            out.append(Input(unique, path))
        else:
            out.append(
                Input(
                    unique,
                    path,
                    image_root=run.image_root,
                    by_rules=run.by_rules,
                    unconfirmed=run.unconfirmed,
                )
            )
    return out
