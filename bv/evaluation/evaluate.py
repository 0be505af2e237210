"""`bv eval`: prompt → rollout → judge → report for one model, into one run folder.

    DIR/config.json    every option, the endpoints, bv's version, the items' and the skill's SHA-256 (no key)
    DIR/summary.json   the run's overall figures, for a table of runs (bv.core.run_summary), kept as it goes
    DIR/results.jsonl  the judged rows (written whole once the judge has finished)
    DIR/report.md      the report, as `bv report --format markdown` writes it
    DIR/report.html    the viewer of every item, as `bv report --html` writes it
    DIR/logs/          what each stage said on stderr (prompt.log, rollout.log, judge.log, report.log)

Each stage is its own runner (bv.stages, bv.reporting), called in this process as the pipeline
`bv prompt | bv rollout | bv judge` runs them, with the same exit statuses. Resuming is re-running:
finished replies and verdicts come from the reply cache, so a run stopped by Ctrl-C, SIGTERM or a
kill sends again only what had not finished. An interrupted run writes no results.

With prices, rows record their cost as the stages' do; `max_cost` bounds the rollout's and the
judge's spend together (the judge starts with the rollout's spend counted), and reaching it stops
the run as a first Ctrl-C does. `batch` sends the rollout's requests, and the LLM judge's when
there is one, as batch jobs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bv.core import outcome as outcomes
from bv.core.atomic import atomic_output
from bv.core.errors import BadRecord, StdoutClosed
from bv.core.jsonl import JsonlWriter, Problems, read_records, silence_stdout
from bv.core.outcome import Outcome, finish, say
from bv.core.records import JudgedRow, PromptRecord, RolloutRow
from bv.core.run_context import current
from bv.evaluation.config import (
    HOW_IT_RUNS,
    BadOption,
    EvalConfig,
    read_config,
    run_record,
    what_changed,
    write_config,
)
from bv.evaluation.logs import logged

if TYPE_CHECKING:
    from bv.evaluation.summary import SummaryFile
    from bv.reporting.report_types import Summary
    from bv.stages.judge_config import JudgeConfig
    from bv.stages.rollout_config import RolloutConfig
    from bv.tracking.tracker import Tracking

RESULTS = "results.jsonl"


@dataclass
class EvalResult:
    """How a run went: its exit status (as the stages': 0, 1, 130, 143), the folder, the figures,
    and its judged rows (`rows()`, `to_pandas()`), read from the folder's results.jsonl."""

    folder: Path
    status: int = outcomes.OK
    row_count: int = 0  # judged rows in results.jsonl
    accuracy: float | None = None  # overall Avg@k, once the report is written
    written: list[str] = field(default_factory=list)  # the files the run wrote
    stopped: str | None = None  # why it stopped before the report, if it did
    fatal: str | None = None  # the error that stopped it (a wrong key, URL or model): fix, then re-run
    spent_usd: float | None = None  # what its replies cost, with prices (cached ones cost nothing now)

    def rows(self) -> Iterator[JudgedRow]:
        """The judged rows, one per (item, run), as results.jsonl holds them (read as bv report
        reads it: a bad line raises BadRecord naming file and line); none when no results were
        written (a stopped run)."""
        from bv.core.records import check_judged_row

        if RESULTS not in self.written:
            return
        for _, row in read_records([str(self.folder / RESULTS)], _Raising(), check_judged_row):
            yield row

    def to_pandas(self) -> Any:
        """The judged rows as a pandas DataFrame, one line per (item, run), in the plain columns
        of bv.api.Report.to_pandas (`correct`, not `hard`: bv.reporting.report_frame); pandas is
        imported only here, and MissingPackage says to install it when it is not."""
        from bv.reporting.report_frame import frame_records, to_pandas

        return to_pandas(frame_records([(self.folder.name, self.rows())]), "EvalResult")


class _Raising(Problems):
    """A problem reading a run's own results is an error, not a line to skip."""

    def report(self, where: Any, why: str) -> None:
        raise BadRecord(f"{where}: {why}")

    def cannot_open(self, path: str, exc: OSError) -> None:
        raise exc


class _Interrupted(Exception):
    """The judge was interrupted: its results are not written (the atomic write is abandoned)."""


def worst(*statuses: int) -> int:
    """One status for several stages, as `set -o pipefail` gives a pipeline: a signal first."""
    signals = [s for s in statuses if s > 128]
    return signals[0] if signals else max(statuses, default=outcomes.OK)


@dataclass(frozen=True)
class _Plan:
    """What the options resolve to, checked before any work: each stage's own config."""

    prompt_options: Any
    selection: Any
    rollout: RolloutConfig
    judge: JudgeConfig


def plan(config: EvalConfig, dry_run: bool = False) -> _Plan:
    """Resolve and check every option (BadOption, BadConfig: a usage error; Fatal: no endpoint);
    `dry_run`: nothing will be sent, so no key is needed."""
    from bv.core.templates import Templates
    from bv.stages.judge_config import JudgeConfig, several
    from bv.stages.prompt import PromptOptions, Skill
    from bv.stages.request_settings import SENDING
    from bv.stages.rollout_config import RolloutConfig

    if not config.items.is_file():
        raise BadOption(f"no items file at {config.items}")
    templates = Templates.load(config.prompts)  # TemplateError is a ValueError: a usage error
    skill = Skill.load(config.skill) if config.skill else None
    prompt_options = PromptOptions(
        style=config.style, templates=templates, skill=skill, image_detail=config.image_detail
    )
    # quiet=False: the logs keep the progress lines; --quiet keeps them off the terminal
    run: dict[str, Any] = {name: getattr(config, name) for name in SENDING} | {"dry_run": dry_run}
    rollout = RolloutConfig(
        backend=config.backend,
        model=config.model,
        base_url=config.base_url,
        api_key=config.api_key,
        exec_cmd=config.exec_cmd,
        request=config.request,
        repeats=config.repeats,
        max_turns=config.max_turns,
        templates=templates,
        ordered=True,
        batch=config.batch,
        **run,
    )
    judge = JudgeConfig(
        mode=config.mode,
        judge_model=several(config.judge_model),
        judge_base_url=several(config.judge_base_url),
        judge_api_key=several(config.judge_api_key),
        judge_params=config.judge_params,
        panel=config.panel,
        calibrate=config.calibrate,
        templates=templates,
        **run,
    )
    if config.batch and judge.endpoint is not None:  # rules decide the rest: nothing to batch
        judge = dataclasses.replace(judge, batch=True)
    return _Plan(prompt_options=prompt_options, selection=config.selection, rollout=rollout, judge=judge)


def _open_folder(config: EvalConfig, record: dict[str, Any]) -> None:
    """Make the run folder, or take up the run it holds: the same options resume it; a run with
    other options is not overwritten (BadOption names what differs)."""
    path = config.out / "config.json"
    before = read_config(path)
    if before is not None:
        changed = what_changed(before.get("options", {}), record["options"])
        if before.get("items_sha256") != record["items_sha256"]:
            changed.append("the items file's content")
        if "skill_sha256" in before and before["skill_sha256"] != record["skill_sha256"]:
            changed.append("the skill file's content")
        if changed:
            raise BadOption(
                f"{config.out} holds a run with other options ({'; '.join(changed)}): give another"
                " `out` DIR, or delete that folder to replace its run"
            )
    write_config(path, record)


def run_eval(config: EvalConfig) -> EvalResult:
    """Run the evaluation into `config.out`; what stopped it is in the result, never an exit. The
    folder is this run's alone while it runs (bv.core.run_folder: another kind of folder, or one
    another bv eval is writing into, is refused)."""
    from bv.core import run_folder

    checked = plan(config)
    with run_folder.owned(config.out, "eval"):
        return _run(config, checked)


def _run(config: EvalConfig, checked: _Plan) -> EvalResult:
    from bv import __version__
    from bv.core.images import content_hash
    from bv.evaluation.summary import SummaryFile
    from bv.tracking.figures import params_of
    from bv.tracking.tracker import open_tracking

    endpoint, judge = checked.rollout.backend_config.get("endpoint"), checked.judge.endpoint
    skill = checked.prompt_options.skill
    record = run_record(
        config,
        endpoint.public if endpoint is not None else None,
        judge.public if judge is not None else None,
        content_hash(config.items),
        skill.sha256 if skill and skill.text else None,
    )
    _open_folder(config, record)
    label = config.label or config.out.resolve().name
    summary = SummaryFile.start(config, label, skill, judge is not None, record["items_sha256"])
    tracking = open_tracking(config.out, config.tracking)  # none asked: nothing imported, no call
    tracking.start(label, {"bv.command": "eval", "bv.version": __version__})
    hashes = {name: record[name] for name in ("skill_sha256", "items_sha256")}
    tracking.params(params_of(record["options"] | hashes, HOW_IT_RUNS))
    if config.skill is not None:
        tracking.artifacts([config.skill], "skill")  # the text the skill_sha256 names
    try:
        result = _stages(config, checked, tracking, summary)
    except BaseException:
        summary.stopped()
        tracking.finish("KILLED")
        raise
    if result.stopped is not None:
        summary.stopped()
    finished = result.stopped is None and result.status == outcomes.OK
    tracking.finish("FINISHED" if finished else "KILLED" if result.stopped else "FAILED")
    return result


def _stages(config: EvalConfig, checked: _Plan, tracking: Tracking, summary: SummaryFile) -> EvalResult:
    """prompt, rollout, judge and report into the folder; the report's figures and files to the
    trackers."""
    from bv.tracking.figures import eval_metrics

    result = EvalResult(config.out, written=["config.json"])
    logs = config.out / "logs"

    current().stage = "prompt"
    with logged(logs / "prompt.log", config.quiet):
        prompts, status = prompt_records(config, checked)
    result.status = status
    summary.stage("rollout", items=len({prompt["id"] for prompt in prompts}))
    if not prompts:
        result.stopped = "no items to evaluate (see logs/prompt.log)"
        result.status = outcomes.ROWS_FAILED
        return result

    current().stage = "rollout"
    with logged(logs / "rollout.log", config.quiet):
        rows, outcome = _rollout(prompts, checked)
        rollout = finish(outcome, None, config.skip_bad)  # its summary in its log
    result.status, result.spent_usd = worst(result.status, rollout), _spent(config, outcome)
    if rollout > 128 or rows is None:
        result.stopped = _stopped(outcome, "the rollout")
        result.fatal = _fatal(outcome)
        return result

    summary.stage("judge", cost_usd=result.spent_usd)
    current().stage = "judge"
    with logged(logs / "judge.log", config.quiet):
        outcome = _judge(rows, config, dataclasses.replace(checked.judge, spent_before=outcome.spent_usd))
        judged = finish(outcome, None, config.skip_bad)
    result.status, result.spent_usd = worst(result.status, judged), _spent(config, outcome)
    if judged > 128:
        result.stopped = _stopped(outcome, "the judge")
        return result
    result.written.append(RESULTS)
    result.row_count = len(rows)
    summary.stage("report", cost_usd=result.spent_usd)

    current().stage = "report"
    with logged(logs / "report.log", config.quiet):
        reported, report = _report(config)
    result.status = worst(result.status, reported)
    result.accuracy = report["overall"]["accuracy"]
    result.written += ["report.md", "report.html", "summary.json"]
    summary.finish(report)
    current().stage = "eval"
    tracking.metrics(eval_metrics(report))
    tracking.artifacts(
        [config.out / name for name in ("report.md", "report.html", "config.json", "summary.json")]
    )
    return result


def prompt_records(config: EvalConfig, checked: _Plan) -> tuple[list[PromptRecord], int]:
    from bv.core.items import parse_item
    from bv.stages.prompt import run_prompt

    problems = Problems()
    prompts: list[PromptRecord] = []
    unmatched = run_prompt(
        read_records([str(config.items)], problems, parse_item),
        checked.prompt_options,
        checked.selection,
        lambda record: prompts.append(record),  # type: ignore[arg-type]
        problems,
    )
    for message in unmatched:
        say(f"error: {message}")
    status = finish(Outcome(), problems, config.skip_bad)
    say(f"{len(prompts)} prompt records")
    return prompts, worst(status, outcomes.ROWS_FAILED if unmatched else outcomes.OK)


def _spent(config: EvalConfig, outcome: Outcome) -> float | None:
    return outcome.spent_usd if config.prices is not None else None


def _stopped(outcome: Outcome, stage: str) -> str:
    """Why a stage stopped: its fatal error, a signal, or the cost limit (its words say the spend)."""
    if outcome.fatal and outcome.signal is None:
        return f"{stage} stopped: {_fatal(outcome)}"
    return f"{outcome.stopped} during {stage}" if outcome.stopped else f"interrupted during {stage}"


def _fatal(outcome: Outcome) -> str | None:
    """The error that stopped a stage, secrets redacted: said even under `quiet`, as it is the cause."""
    from bv.core.redaction import redact

    return None if outcome.fatal is None or outcome.signal is not None else redact(outcome.fatal)


def _rollout(prompts: list[PromptRecord], checked: _Plan) -> tuple[list[RolloutRow] | None, Outcome]:
    from bv.stages.rollout import run_rollout

    rows: list[RolloutRow] = []
    outcome = run_rollout(prompts, checked.rollout, lambda row: rows.append(cast(RolloutRow, dict(row))))
    return (None if outcome.fatal else rows), outcome


def _judge(rows: list[RolloutRow], config: EvalConfig, judge: JudgeConfig) -> Outcome:
    """Judge the rows into results.jsonl, written whole, or not at all when the judge is stopped."""
    from bv.stages.judge import run_judge

    outcome = Outcome()
    try:
        with atomic_output(config.out / RESULTS) as stream:
            outcome = run_judge(rows, judge, JsonlWriter(stream).write)
            if outcome.signal is not None:
                raise _Interrupted()  # a partial results file would look like a result
    except _Interrupted:
        pass
    return outcome


def _report(config: EvalConfig) -> tuple[int, Summary]:
    """report.md and report.html from results.jsonl, as `bv report` makes them; the table on stdout."""
    import sys

    from bv.reporting.advice import notes, warnings
    from bv.reporting.grid import comparison_of, summaries_of
    from bv.reporting.html_page import write_html
    from bv.reporting.render import render_markdown, render_table
    from bv.reporting.report import Input, build_report

    problems = Problems()
    source = Input(config.label or config.out.resolve().name or "results", str(config.out / RESULTS))
    try:
        built, rows = build_report([source], problems, keep_rows=True)
        summaries = summaries_of(built)
        with atomic_output(config.out / "report.md") as stream:
            render_markdown(built, stream)
        refused = write_html(
            config.out / "report.html",
            summaries,
            rows or [],
            comparison_of(built),
            [config.items.resolve().parent],
        )
        if refused:
            say(f"{refused} image(s) outside {config.items.resolve().parent} not embedded in report.html")
        if not config.quiet:
            try:
                render_table(built, sys.stdout)
            except (StdoutClosed, BrokenPipeError):  # `bv eval ... | head`: the run goes on
                silence_stdout()
    finally:
        source.close()
    by_rules = {summaries[0]["name"]} if config.mode == "rules" else set()
    for line in notes(summaries, by_rules):
        say(f"note: {line}")
    for line in warnings(summaries, by_rules):
        say(f"warning: {line}")
    status = finish(Outcome(), problems, config.skip_bad)
    overall = summaries[0]["overall"]
    failed = bool(overall["errors"] or overall["judge_errors"])
    return worst(status, outcomes.ROWS_FAILED if failed else outcomes.OK), summaries[0]
