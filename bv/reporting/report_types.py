"""The shape of a report: what `bv report --format json` writes and `bv.api.Report.data` holds.

One TypedDict per JSON object, the way bv/core/records.py types the rows: bv.reporting.tally and
bv.reporting.report build these, the renderers (terminal, Markdown, CSV, JSON, the HTML viewer) read
them, so the type checker refuses a misspelt key on either side. docs/formats.md lists exactly these fields
(tests/test_typed_keys.py checks it, and that a real report has exactly these keys).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict, final


class Figures(TypedDict):
    """The figures of one group (`overall`, a type, a subtype, an answer type)."""

    n: int  # distinct items
    rows: int
    finished: int
    runs: int
    correct: int
    denominator: int
    accuracy: float | None  # Avg@k over runs; None when no row counts
    std: float | None  # over runs, with several
    per_run: list[float]
    ci95: list[float] | None  # Wilson 95% interval, with one run
    chance: float | None
    errors: int
    judge_errors: int
    undecided: int
    refusals: int  # rows whose final reply was a refusal
    content_filtered: int  # rows a content filter stopped (a filtered reply, or the prompt refused)
    cut_off: int  # rows cut off at the token limit with no answer
    answer_in_reasoning: int  # rows whose content has no answer while the reasoning has one


class SubtypeFigures(Figures):
    """A subtype's figures also say which type it belongs to."""

    type: str


class StartedAt(TypedDict):
    first: str
    last: str


class Provenance(TypedDict):
    endpoints: list[str]
    bv_versions: list[str]
    started_at: StartedAt | None


class UsageTotals(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    latency_s_mean: float | None
    unboxed: int  # replies without \boxed{}


@final  # so that `"inputs" in report` tells a Summary from a ReportData
class Summary(TypedDict):
    """Every figure of one input (or one --by group)."""

    name: str
    overall: Figures
    by_type: dict[str, Figures]
    by_subtype: dict[str, SubtypeFigures]
    by_ans_type: dict[str, Figures]
    accuracy_over: str  # "all rows", or "finished rows (--exclude-failed)"
    models: list[str]
    provenance: Provenance
    usage: UsageTotals


class PairedTest(TypedDict):
    """B against A on the rows both judged, paired by (id, run), and the exact McNemar p-value."""

    pairs: int
    both_right: int
    both_wrong: int
    improved: int
    regressed: int
    p_value: float
    improved_ids: list[str]  # `id#run`
    regressed_ids: list[str]


class Paired(PairedTest):
    """The paired test of exactly two inputs, named."""

    a: str
    b: str


class Comparison(TypedDict):
    """How several inputs compare: on the rows they all have."""

    common_rows: int
    common_items: int
    left_out: dict[str, int]  # by input name
    paired: NotRequired[Paired]  # for exactly two inputs


class ReportData(TypedDict):
    """`bv report --format json`: one shape whatever the number of inputs."""

    inputs: list[Summary]
    comparison: Comparison | None  # None for one input


# What bv.reporting.report.build_report makes: one input's Summary, or several compared
# (bv.reporting.render reads both).
Built = Summary | ReportData
