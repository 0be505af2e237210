"""The shape of a report: what `bv report --format json` writes and `bv.api.Report.data` holds.

One TypedDict per JSON object, the way bv/core/records.py types the rows: bv.reporting.tally and
bv.reporting.report build these, the renderers (terminal, Markdown, CSV, JSON, the HTML viewer) read
them, so the type checker refuses a misspelt key on either side. docs/formats.md lists exactly these fields
(tests/project/test_typed_keys.py checks it, and that a real report has exactly these keys).
"""

# No `from __future__ import annotations` here: under Python 3.11 it hides NotRequired from the
# TypedDicts at run time (every key would be listed in __required_keys__).

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
    std: float | None  # run-to-run spread: the population std of the per-run accuracies, with several
    per_run: list[float]
    item_accuracy: float | None  # the mean of item scores (each item's mean over its runs)
    se: float | None  # standard error over items
    ci95: list[float] | None  # 95% interval over items (Summary.interval says how)
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


class ShardsSeen(TypedDict):
    """The rows' `shard` (bv rollout --shard): by shard count N, the shards K present and missing
    (at most 1,000 named), rows with no shard, rows whose shard is not K/N (bv.core.shards)."""

    present: dict[str, list[int]]
    missing: dict[str, list[int]]
    unsharded_rows: int
    unreadable: int


class Provenance(TypedDict):
    endpoints: list[str]
    bv_versions: list[str]
    backends: list[str]
    params: list[str]  # sampling parameters, as JSON
    judge_models: list[str]
    started_at: StartedAt | None
    shards: NotRequired[ShardsSeen]  # only when some row records a shard
    made_by: NotRequired[dict[str, str]]  # skill, style, prompts, judge_version (named as --by does)


class UsageTotals(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    latency_s_mean: float | None
    unboxed: int  # replies without \boxed{}
    cost_usd: float | None  # the rows' cost (bv.reporting.costs); None when no row has one
    cost_unknown: int  # rows whose cost is not known, left out of cost_usd


class PanelSummary(TypedDict):
    """How a panel of LLM judges agreed (bv.reporting.judges), over the rows all judged."""

    judges: list[str]
    rule: str  # majority, unanimous, any
    rows: int  # rows every judge gave a verdict on
    judge_errors: int  # rows some judge could not judge (left out)
    other_panels: int  # rows judged by another panel (left out)
    method: str  # Cohen's kappa (two judges), Fleiss' kappa (more)
    kappa: float | None  # None: undefined (every judge said the same of every row, or no row counts)
    agreement: float | None  # share of rows every judge said the same of
    right_share: list[float]  # each judge's share of "right", in `judges`' order
    cost_usd: list[float | None]  # each judge's cost (None: unknown or not priced)
    disagreements: int
    disagreeing_rows: list[str]  # `id#run`, the first 50


class CalibrationSummary(TypedDict):
    """An LLM judge measured on rows the rules decided, and its rows' accuracy corrected
    (bv.reporting.judges, bv.core.calibration)."""

    judge: str
    rows: int  # calibration rows with the judge's verdict
    judge_errors: int  # calibration rows the judge could not judge (left out)
    positives: int  # of them, rows the rules found right
    negatives: int
    sensitivity: float | None  # P(judge says right | the rules say right)
    sensitivity_ci95: list[float] | None
    specificity: float | None  # P(judge says wrong | the rules say wrong)
    specificity_ci95: list[float] | None
    judged_rows: int  # rows the LLM judge decided
    judged_accuracy: float | None  # their share of right, as judged (uncorrected)
    judged_ci95: list[float] | None
    corrected_accuracy: float | None  # None: not valid (sensitivity + specificity ≤ 1, a group empty)
    corrected_ci95: list[float] | None  # widened by the calibration's uncertainty
    answer_types: dict[str, dict[str, int]]  # `calibration` and `judged`: rows by answer type


@final  # so that `"inputs" in report` tells a Summary from a ReportData
class Summary(TypedDict):
    """Every figure of one input (or one --by group)."""

    name: str
    overall: Figures
    by_type: dict[str, Figures]
    by_subtype: dict[str, SubtypeFigures]
    by_ans_type: dict[str, Figures]
    accuracy_over: str  # "all rows", or "finished rows (--exclude-failed)"
    interval: str  # how ci95 is computed
    items_per_run: dict[str, int]  # run -> items it covers
    complete: bool  # every run covers every item
    models: list[str]
    provenance: Provenance
    usage: UsageTotals
    judge_panel: NotRequired[PanelSummary]  # when a panel of LLM judges judged some row
    judge_calibration: NotRequired[CalibrationSummary]  # when the LLM judge was calibrated


class Difference(TypedDict):
    """B against A per item on one group's items (bv.core.stats.paired_comparison)."""

    n_items: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None  # mean_b - mean_a
    ci95: list[float] | None  # 95% interval on diff, over items
    p_value: float
    p_adjusted: float  # adjusted for the number of groups at this level (Comparison.adjustment)
    improved: int  # items
    regressed: int
    unchanged: int
    correlation: float | None  # of the two inputs' item scores


class Paired(Difference):
    """One input (b) against the baseline (a), overall and by type and subtype."""

    a: str
    b: str
    method: str  # the test
    verdict: str  # the one-line answer: better or not, and by how much
    improved_ids: list[str]  # item ids
    regressed_ids: list[str]
    by_type: dict[str, Difference]
    by_subtype: dict[str, Difference]
    by_ans_type: dict[str, Difference]


class Power(TypedDict):
    """What a paired comparison on these items can detect (docs/reports.md, Power)."""

    a: str
    b: str | None  # None: no pair at hand, correlation assumed 0
    n_items: int
    runs: float
    var_diff: float | None
    noise_per_run: float
    alpha: float
    power: float
    mde: float | None  # minimum detectable difference
    items_needed: dict[str, int | None]  # target difference (points) -> items, at these runs
    runs_needed: dict[str, int | None]  # target difference (points) -> runs per item, on these items


class Comparison(TypedDict):
    """How several inputs compare: on the rows they all have, each against the baseline."""

    common_rows: int
    common_items: int
    left_out: dict[str, int]  # rows, by input name
    items: dict[str, int]  # items, by input name, before restricting to the common rows
    baseline: str
    adjustment: str  # how p_adjusted is computed
    pairs: list[Paired]  # each other input against the baseline
    paired: NotRequired[Paired]  # for exactly two inputs: pairs[0]
    differs: dict[str, list[str]]  # provenance field -> its values, where inputs differ


class ReportData(TypedDict):
    """`bv report --format json`: one shape whatever the number of inputs."""

    inputs: list[Summary]
    comparison: Comparison | None  # None for one input
    power: list[Power] | None  # with --power


# What bv.reporting.report.build_report makes: one input's Summary, or several compared
# (bv.reporting.render reads both).
Built = Summary | ReportData
