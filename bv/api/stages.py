"""bv.api's stage functions: prompt, rollout, judge, merge and report over iterables of records,
each building its stage's typed config from keywords as the command builds it from options (the
package's docstring, bv/api/__init__.py, says what they keep)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bv.api.inputs import PathLike, checked, checked_one, records_of, report_inputs
from bv.core.errors import BadConfig, BadRecord, Fatal, Interrupted
from bv.core.records import (
    Item,
    JudgedRow,
    PromptRecord,
    RolloutRow,
    check_prompt_record,
    check_rollout_record,
)
from bv.reporting.report_view import Report
from bv.reporting.runs_view import RunsTable

if TYPE_CHECKING:  # for the checker only: `import bv.api` stays cheap
    from typing import Unpack

    from bv.api.keywords import JudgeKeywords, RolloutKeywords


def prompt(
    items: Iterable[Mapping[str, Any]] | str | Path,
    *,
    skill: str | Path | Any = None,
    style: str | None = None,  # None: bv prompt's default (PromptOptions declares both)
    image_root: str | Path | None = None,
    image_detail: str | None = None,  # None: bv prompt's default
    templates: Any = None,
    allow_any_path: bool = False,
) -> Iterator[PromptRecord]:
    """Prompt records for items (official or bv form), lazily, as `bv prompt` writes them: a
    list of items, or an items file (a str or a Path), whose images are found beside it.

    `skill`: a Markdown file, or a `bv.stages.prompt.Skill(name, text)`; `image_root`: the folder the
    items' image paths are relative to (default: the current folder); `templates`: a
    `bv.core.templates.Templates` for `--prompts DIR`. A bad item raises BadRecord naming its index."""
    from bv.core.items import parse_item
    from bv.core.templates import BV_TEMPLATES
    from bv.stages.prompt import PromptOptions, Skill, prompt_records

    loaded = Skill.load(Path(skill)) if isinstance(skill, (str, Path)) else skill
    declared: dict[str, Any] = {k: v for k, v in (("style", style), ("image_detail", image_detail)) if v}
    options = PromptOptions(
        **declared,
        templates=templates or BV_TEMPLATES,
        skill=loaded,
        image_root=Path(image_root) if image_root is not None else None,
        allow_any_path=allow_any_path,
    )

    beside = Path(items).parent if isinstance(items, PathLike) and image_root is None else None
    given = records_of(items, "items")

    def parsed() -> Iterator[tuple[int, Item]]:
        for index, item in enumerate(given):
            yield index, checked_one(item, parse_item, f"item {index}")

    def bad(index: int, exc: BadRecord) -> None:
        raise BadRecord(f"item {index}: {exc}") from None

    yield from prompt_records(parsed(), lambda _: beside, options, bad)


def _ended(outcome: Any, rows: list[Any]) -> list[Any]:
    """The rows, or what stopped the run raised (rows already finished are in the cache)."""
    if outcome.fatal is not None:
        raise Fatal(outcome.fatal)
    if outcome.signal is not None:
        from bv.core.outcome import SIGNAL_NAMES

        why = outcome.stopped or f"interrupted by {SIGNAL_NAMES.get(outcome.signal, 'a signal')}"
        raise Interrupted(
            f"{why} after {len(rows)} rows; call again to resume from the cache",
            signal=outcome.signal,
            rows=len(rows),
        )
    return rows


def rollout(
    prompts: Iterable[Mapping[str, Any]] | str | Path, **settings: Unpack[RolloutKeywords]
) -> list[RolloutRow]:
    """Rollout rows for prompt records (a list, or a prompts file as a str or a Path), in input
    order (each record `repeats` times), as `bv rollout --ordered` writes them; every keyword is
    the command's option of the same name, at the same default (bv.stages.rollout_config.
    RolloutConfig declares both; bv.api.keywords.RolloutKeywords types them). `backend`: openai,
    azure, exec or chance; the endpoint comes from `base_url`/`api_key` or the environment, as
    for the command (OPENAI_BASE_URL, OPENAI_API_KEY). `seed` is sent with every request (and
    seeds the chance backend's guesses); `params`: further request parameters, `extra_body`
    fields sent as given (the command's `-p`). `cache`: a path, None for none, or the command's
    default cache. `quiet=False` shows progress on stderr. The waits (`rate_limit_patience`,
    `connect_timeout`, `first_byte_timeout`, `read_timeout`, `stall_notice`) are in seconds.
    `shard`: (k, n), "K/N", or "auto" / "auto/N" from a SLURM job array or a Kubernetes Indexed
    Job. `prices`: a price file or "genai-prices", recording each row's `cost_usd`; `max_cost`
    (USD, needs `prices`) stops starting requests once the run has spent it, as Ctrl-C would
    (Interrupted). `batch=True` sends the requests as batch jobs and waits for them
    (docs/batch.md). Settings that cannot work raise BadConfig."""
    from bv.engine.on_thread import beside_loop, loop_running

    if loop_running():  # a notebook's, an async app's: this one runs on a thread of its own
        return beside_loop("rollout", lambda: rollout(prompts, **settings))
    from bv.core.run_context import own_run

    with own_run("rollout"):
        from bv.stages.rollout import run_rollout

        config = _rollout_config(**settings)
        given = _until_stopped(records_of(prompts, "prompts"))
        records: list[PromptRecord] = _until_stopped(checked(given, check_prompt_record, "prompt record"))
        rows: list[RolloutRow] = []
        outcome = run_rollout(records, config, lambda row: rows.append(cast(RolloutRow, dict(row))))
        return _ended(outcome, rows)


def _rollout_config(**keywords: Any) -> Any:
    """The RolloutConfig of `rollout`'s keywords (the command builds the same from its options)."""
    from bv.stages.rollout_config import RolloutConfig

    return _config(RolloutConfig, keywords, ordered=True)


def _config(config_type: Any, keywords: Mapping[str, Any], **fixed: Any) -> Any:
    """A stage's config of bv.api's keywords: each at its declared default unless given (one
    without a default must be given)."""
    from dataclasses import MISSING

    from bv.core.settings import api_default, converted

    names = api_keywords(config_type)
    unknown = sorted(set(keywords) - set(names))
    if unknown:
        raise TypeError(f"unexpected keyword(s): {', '.join(unknown)}")
    defaults = {name: api_default(config_type, name) for name in names}
    given = {k: v for k, v in defaults.items() if v is not MISSING} | dict(keywords)
    return config_type(**converted(config_type, given), **fixed)


def api_keywords(config_type: Any) -> list[str]:
    """bv.api's keywords for a config: the names it is given by, but what the stage sets itself."""
    from bv.core.settings import keywords

    return [name for name in keywords(config_type) if name not in _NOT_KEYWORDS]


# The config fields that are the stage's own to set, not bv.api's keywords.
_NOT_KEYWORDS = ("ordered", "dry_run", "spent_before")


def _until_stopped(records: Iterable[Any]) -> list[Any]:
    """The records, read only until a stop is asked when the run is an async variant's (its
    checks too, and the rules judge, which has no event loop to tell)."""
    from bv.core.outcome import STOP_REQUEST
    from bv.engine.on_thread import UntilStopped

    request = STOP_REQUEST.get()
    return list(records) if request is None else UntilStopped(list(records), request)


async def arollout(
    prompts: Iterable[Mapping[str, Any]] | str | Path, **settings: Unpack[RolloutKeywords]
) -> list[RolloutRow]:
    """`rollout` for code inside a running event loop: the same run on a thread of its own.
    Cancelled, it stops as after Ctrl-C (what finished is cached), then raises CancelledError."""
    from bv.engine.on_thread import on_thread

    given = records_of(prompts, "prompts")
    records = given if isinstance(given, list) else list(given)
    return await on_thread("rollout", lambda: rollout(records, **settings))


def judge(
    rows: Iterable[Mapping[str, Any]] | str | Path, **settings: Unpack[JudgeKeywords]
) -> list[JudgedRow]:
    """Judged rows for rollout rows (a list, or a rollout file as a str or a Path), in input
    order, as `bv judge` writes them; every keyword is
    the command's option of the same name, at the same default (bv.stages.judge_config.JudgeConfig
    declares both). `mode`: rules, llm (every row to the LLM judge) or auto (rules, then the LLM
    judge when one is given). `judge_params`: extra fields of the judge's request body, sent as
    written. `prices` and `max_cost` as for `rollout`, for the LLM judge's replies
    (`judge_cost_usd`). `batch=True` sends the LLM judge's requests as batch jobs (docs/batch.md)."""
    from bv.engine.on_thread import beside_loop, loop_running

    if loop_running():  # a notebook's, an async app's: this one runs on a thread of its own
        return beside_loop("judge", lambda: judge(rows, **settings))
    from bv.core.run_context import own_run

    with own_run("judge"):
        from bv.stages.judge import run_judge

        config = _judge_config(**settings)
        given = _until_stopped(records_of(rows, "rows"))
        records: list[RolloutRow] = _until_stopped(checked(given, check_rollout_record, "rollout row"))
        judged: list[JudgedRow] = []
        outcome = run_judge(records, config, lambda row: judged.append(cast(JudgedRow, dict(row))))
        return _ended(outcome, judged)


def _judge_config(**keywords: Any) -> Any:
    """The JudgeConfig of `judge`'s keywords (the command builds the same from its options)."""
    from bv.stages.judge_config import JudgeConfig

    return _config(JudgeConfig, keywords)


async def ajudge(
    rows: Iterable[Mapping[str, Any]] | str | Path, **settings: Unpack[JudgeKeywords]
) -> list[JudgedRow]:
    """`judge` for code inside a running event loop: the same run on a thread of its own.
    Cancelled, it stops as after Ctrl-C (what finished is cached), then raises CancelledError."""
    from bv.engine.on_thread import on_thread

    given = records_of(rows, "rows")
    records = given if isinstance(given, list) else list(given)
    return await on_thread("judge", lambda: judge(records, **settings))


def merge(*inputs: Iterable[Mapping[str, Any]] | str | Path, sort: bool = False) -> list[dict[str, Any]]:
    """One row per (id, run) from several sets of rows (runs, shards; each a list or a file as a str
    or a Path), a later input winning, as
    `bv merge` does; `sort` orders them by (id, run) naturally. A row replacing one made by
    another model or judge version is warned about (warnings.warn), as the command says it."""
    import warnings

    from bv.core.jsonl import Source
    from bv.core.records import check_row
    from bv.stages.merge import merge_rows, ordered_keys

    def sourced() -> Iterator[tuple[Source, dict[str, Any]]]:
        for number, rows in enumerate(inputs, 1):
            for row in checked(records_of(rows, f"input {number}"), check_row, f"input {number}: row"):
                yield Source(f"input {number}", 0, None), row

    result = merge_rows(sourced())
    for conflict in result.conflicts:
        warnings.warn(f"bv.api.merge: {conflict}", stacklevel=2)
    return [result.rows[key] for key in ordered_keys(result, sort)]


def report(
    results: Mapping[str, Iterable[Mapping[str, Any]] | str | Path]
    | Iterable[Mapping[str, Any]]
    | str
    | Path,
) -> Report:
    """The report of judged rows: one input (an iterable of rows, a results file or a `bv eval`
    run folder as a str or a Path), or several by name (`{"v1": rows, "v2": "runs/v2"}`), compared
    on the rows they all have, as `bv report` does. A bad line of a file raises BadRecord naming
    the file and line; no input, or one of another kind, BadConfig."""
    from bv.core.records import check_judged_row
    from bv.reporting.render import report_json
    from bv.reporting.report import build_report

    inputs = [
        (name, checked(rows, check_judged_row, f"{name}: judged row"))
        for name, rows in report_inputs(results)
    ]
    built, _ = build_report(inputs)
    return Report(report_json(built), inputs=tuple(inputs))


def runs(
    folders: str | Path | Iterable[str | Path],
    *,
    baseline: str | None = None,
    sort: str = "accuracy",
    adjust: str = "holm",
) -> RunsTable:
    """The table across runs that `bv report runs/` prints: a folder of `bv eval` run folders (or
    the run folders themselves), one row per run (finished, running or stopped) and each finished
    run's paired verdict against `baseline` (by default the first finished run) where the items
    match. Bad input raises BadConfig."""
    from bv.reporting.runs import SORTS, is_eval_folder, runs_table

    given = [folders] if isinstance(folders, (str, Path)) else list(folders)
    paths: list[Path] = []
    for entry in given:
        if not isinstance(entry, (str, Path)):
            raise BadConfig(f"runs: {type(entry).__name__} is not a folder (give a str or a Path)")
        path = Path(entry)
        if is_eval_folder(str(path)):
            paths.append(path)
        elif path.is_dir():
            paths += sorted(p for p in path.iterdir() if is_eval_folder(str(p)))
        else:
            raise BadConfig(f"runs: {path} is not a folder")
    if not paths:
        raise BadConfig("runs: no bv eval run folder in " + ", ".join(map(str, given)))
    if sort not in SORTS:
        raise BadConfig(f"runs: `sort` is one of {', '.join(SORTS)}, not {sort!r}")
    rows, verdicts = runs_table(paths, baseline, sort, adjust)
    return RunsTable(tuple(rows), tuple(verdicts))
