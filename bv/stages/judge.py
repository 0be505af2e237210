"""The judge stage: extract each reply's answer and decide whether it is right.

Rules decide first (bv.core.rules); what they cannot decide goes to an LLM judge in `auto` mode,
every item goes to it in `llm` mode (the official BabyVision protocol), none in `rules`
mode. The LLM judge is any OpenAI-compatible model called through the same engine as the
rollout, with its cache and retries, so re-judging a file costs no new calls. A judge reply
that is not exactly True or False is a judge error, counted apart, never a 0 or a 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import signal
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from dataclasses import dataclass
from typing import Any, cast

from bv.core import redaction
from bv.core.errors import Fatal, Interrupted, ItemFailure, StdoutClosed
from bv.core.extract import extract_answer, extract_answer_async, off_loop, strip_thinking
from bv.core.jsonl import Problems, read_records
from bv.core.outcome import SIGNAL_NAMES, STOP_SIGNALS, Outcome, say
from bv.core.records import (
    JUDGE_FIELDS,
    JudgedRow,
    JudgeFields,
    RolloutRow,
    check_rollout_record,
    choice_lines,
    drop_stage,
    without_stage,
)
from bv.core.rules import RULES_VERSION, Verdict, decide
from bv.core.run_context import current
from bv.core.templates import BV_TEMPLATES, Templates, fenced
from bv.engine.backends import Reply, make_backend
from bv.engine.caller import Caller, run_stage
from bv.engine.endpoints import Endpoint
from bv.engine.params import body_fields, with_defaults
from bv.engine.prices import Cost, Prices, first_url, reply_cost
from bv.engine.progress import Stats
from bv.stages.judge_calibration import calibration, in_sample, unchecked
from bv.stages.judge_config import JudgeConfig
from bv.stages.judge_panel import Panel

JUDGE_DEFAULTS = {"temperature": 0}  # sent only where the judge model accepts it (bv.engine.params)


def judge_params(endpoint: Endpoint, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the LLM judge's requests carry: bv's defaults the judge model accepts and that
    `given` (--judge-param, sent as written) does not replace, then `given`."""
    given = dict(given or {})
    defaults = with_defaults(JUDGE_DEFAULTS, endpoint.rule)
    params: dict[str, Any] = {k: v for k, v in defaults.items() if k not in given}
    if given:
        params["extra_body"] = given
    return params


def judge_version(templates: Templates = BV_TEMPLATES) -> str:
    """A short hash of the judge prompt (bv's or the user's replacement) and the rules: rows with
    another version were judged differently."""
    blob = templates.text("judge") + "\0" + RULES_VERSION
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def judge_messages(
    record: RolloutRow, extracted: str | None, templates: Templates = BV_TEMPLATES
) -> list[dict[str, str]]:
    question = record["question"].strip()
    if record["ans_type"] == "choice":
        question += "\n\n" + choice_lines(record["choices"])
    gold = " or ".join(record["answer"])
    answer = "None" if extracted is None else extracted
    text = templates.render(  # each value fenced: data, never a section or an instruction
        "judge", question=fenced(question), gold=fenced(gold), answer=fenced(answer)
    )
    return [{"role": "user", "content": text}]


_VERDICT = re.compile(r"^\W*(true|false)\W*$", re.IGNORECASE)


def parse_verdict(reply: str) -> int | None:
    """1 for True, 0 for False, None for anything else; `untrue` or `True or False` are not verdicts."""
    text = strip_thinking(reply or "").strip()
    boxed = extract_answer(text)
    candidates = [boxed] if boxed is not None else [text, text.splitlines()[-1] if text else ""]
    for candidate in candidates:
        match = _VERDICT.match(candidate.strip())
        if match:
            return int(match.group(1).lower() == "true")
    return None


# What the LLM judge said of a row: hard, raw reply, error, and its reply when it replied.
LLMVerdict = tuple[int | None, str | None, str | None, Reply | None]


@dataclass
class LLMJudge:
    caller: Caller
    params: dict[str, Any]  # judge_params: what every judge request carries
    sent: dict[str, Any]  # those parameters as the request body spells them, recorded per row
    templates: Templates = BV_TEMPLATES
    unusable: str | None = None  # why no judge call can succeed (unreachable, key refused), once known
    prices: Prices | None = None  # what each verdict's reply cost is recorded by (None: not priced)

    @property
    def model(self) -> str:
        return self.caller.backend.model

    def cost(self, reply: Reply | None) -> Cost | None:
        """What a verdict's reply cost, when prices were asked for and it replied: priced as a
        rollout's reply is, by the model the server named (else the one asked for), on the basis
        it was paid at (batch or online)."""
        if self.prices is None or reply is None:
            return None
        where = first_url(self.caller.backend.endpoint)
        return reply_cost(
            self.prices, reply.usage, self.model, reply.model, endpoint=where, batch=reply.batch
        )

    async def verdict(self, record: RolloutRow, extracted: str | None) -> LLMVerdict:
        """(hard, raw reply, error, reply) from the LLM judge; the reply None without one (a cached
        reply has the usage and basis it was paid with, so a re-judge writes the same rows). When
        the judge endpoint turns out unusable, the error is said once and every later row goes
        out at once as a judge error: the judge stage still writes every row, and exits 1."""
        if self.unusable is not None:
            return None, None, f"LLM judge unusable: {self.unusable}", None
        try:
            reply, cached = await self.caller.call(
                judge_messages(record, extracted, self.templates),
                self.params,
                keep=lambda reply: parse_verdict(reply.content) is not None,  # a re-run asks again
            )
        except ItemFailure as exc:
            return None, None, f"judge request failed: {exc}", None
        except Interrupted:  # Ctrl-C: the row still goes out, as a judge error to re-judge later
            return None, None, "interrupted before the LLM judge answered; run bv judge again", None
        except Fatal as exc:
            if self.unusable is None:
                self.unusable = redaction.redact(str(exc))
                say(f"error: {self.unusable}; the rows still go out, those left to the LLM as judge errors")
            return None, None, f"LLM judge unusable: {self.unusable}", None
        self.caller.stats.instant += cached  # no wait: the ETA goes by the verdicts asked for
        hard = await off_loop(parse_verdict, reply.content)  # a judge can loop too
        error = None if hard is not None else "judge reply is neither True nor False"
        return hard, reply.content, error, reply


async def judge_one(
    record: RolloutRow,
    mode: str,
    llm: LLMJudge | Panel | None,
    version: str,
    templates: dict[str, str] | None = None,
    calibrate: float | None = None,
) -> JudgedRow:
    """One judged row: the record with the judge fields replaced (`templates`: the replaced
    judge template recorded, by name and SHA-256; `calibrate`: the share of rows the rules
    decide that the LLM judge is asked about too, bv.stages.judge_calibration)."""
    if llm is None or record.get("error"):
        return judge_by_rules(record, version, templates)
    extracted = await extract_answer_async(record.get("response"))  # a long reply: off the loop
    in_reasoning = await extract_answer_async(final_reasoning(record)) if extracted is None else None
    row = cast(RolloutRow, without_stage(record, "judge"))
    verdict = decide(row, extracted)
    if (mode == "llm" or (mode == "auto" and verdict.hard is None)) and isinstance(llm, Panel):
        said = await llm.fields(row, extracted)
        said["extracted"], said["judge_version"], said["reasoning_answer"] = extracted, version, in_reasoning
        said["judge_reason"] = f"LLM judge panel; rules said: {verdict.reason}"
        if templates:
            said["judge_templates"] = templates
        cast(dict[str, Any], row).update({k: said[k] for k in JUDGE_FIELDS if k in said})  # type: ignore[literal-required]
        return cast(JudgedRow, row)
    if mode == "llm" or (mode == "auto" and verdict.hard is None):
        assert isinstance(llm, LLMJudge)
        hard, reply, error, answer = await llm.verdict(row, extracted)
        cost, usage = llm.cost(answer), None if answer is None else dict(answer.usage)
        fields: JudgeFields = {
            "extracted": extracted,
            "judge_version": version,
            "judge_model": llm.model,
            "judge_params": llm.sent,
            "judge_reply": reply,
            "judge_error": error,
            "judge_cost_usd": None if cost is None else cost.usd,
            "judge_price_source": None if cost is None else cost.source,
            "reasoning_answer": in_reasoning,
            "hard": hard,
            "decided_by": "llm" if error is None else "error",
            "undecided": False,
            "judge_reason": f"LLM judge; rules said: {verdict.reason}",
        }
        if usage is not None:
            fields["judge_usage"] = usage
        if answer is not None and answer.batch:
            fields["judge_batch"] = True
        if templates:
            fields["judge_templates"] = templates
        cast(dict[str, Any], row).update(fields)
        return cast(JudgedRow, row)
    judged = _by_rules(row, extracted, verdict, version, in_reasoning, templates)
    if calibrate and isinstance(llm, LLMJudge) and in_sample(judged, calibrate):
        await calibration(judged, llm, extracted)
    return judged


def final_reasoning(record: Mapping[str, Any]) -> str | None:
    """The reasoning of a row's final reply (None for a failed row, or a reply without any)."""
    turns = record.get("turns")
    if record.get("response") is None or not isinstance(turns, list) or not turns:
        return None
    last = turns[-1]
    reasoning = last.get("reasoning") if isinstance(last, dict) else None
    return reasoning if isinstance(reasoning, str) else None


def reasoning_answer(record: Mapping[str, Any], extracted: str | None) -> str | None:
    """The answer the final reply's reasoning boxes when its content has none. The official
    protocol reads the answer from the content, so this is not scored: it is flagged."""
    return extract_answer(final_reasoning(record)) if extracted is None else None


def _by_rules(
    row: RolloutRow, extracted: str | None, verdict: Verdict, version: str, in_reasoning: str | None,
    templates: dict[str, str] | None, decided_by: str = "rules",
) -> JudgedRow:  # fmt: skip
    """The row (a copy of the input's, its judge fields dropped) judged by the rules (undecided:
    counted wrong, and said so). The fields are written into it, in JudgeFields' order, not
    merged from a second dict: re-scoring judges every row again (docs/performance.md)."""
    judged = cast(JudgedRow, row)
    judged["extracted"] = extracted
    judged["judge_version"] = version
    judged["judge_model"] = judged["judge_params"] = judged["judge_reply"] = None
    judged["judge_error"] = judged["judge_cost_usd"] = judged["judge_price_source"] = None
    judged["reasoning_answer"] = in_reasoning
    judged["hard"] = verdict.hard if verdict.hard is not None else 0
    judged["decided_by"] = decided_by
    judged["undecided"] = verdict.hard is None
    judged["judge_reason"] = verdict.reason
    if templates:
        judged["judge_templates"] = templates
    return judged


# A row whose rollout failed: wrong, counted with the rollout errors, never shown to an LLM judge
_ROLLOUT_FAILED = Verdict(0, "not judged: the rollout failed (its `error` says why; re-run bv rollout)")


def judge_by_rules(
    record: RolloutRow, version: str, templates: dict[str, str] | None = None, in_place: bool = False
) -> JudgedRow:
    """One row judged by the rules alone (undecided rows count wrong; `in_place`: into the record,
    not a copy); a row whose rollout failed is not judged (it goes out wrong, as the rollout error)."""
    row = drop_stage(record, "judge") if in_place else cast(RolloutRow, without_stage(record, "judge"))
    if record.get("error"):
        return _by_rules(row, None, _ROLLOUT_FAILED, version, None, templates, "rollout_error")
    extracted = extract_answer(record.get("response"))
    in_reasoning = reasoning_answer(record, extracted)
    return _by_rules(row, extracted, decide(row, extracted), version, in_reasoning, templates)


def run_by_rules(
    records: Iterable[RolloutRow],
    judge: Callable[[RolloutRow], JudgedRow],
    write: Callable[[Mapping[str, Any]], None],
) -> Outcome:
    """Judge by rules with no LLM: nothing to wait for, so no event loop, reader thread or
    workers, whose hand-offs cost more than the judging (docs/performance.md). One row in, one
    row out, flushed. As in the engine for a judge, the first Ctrl-C or SIGTERM is noted and
    the rest of the input still passed on; a second one quits at once."""
    result = Outcome()
    context = current()

    def on_signal(signum: int, frame: Any) -> None:
        if result.signal is not None:
            say("interrupted again; quitting now")
            if context.hard_stop is not None:
                context.hard_stop(signum)
            raise Interrupted("interrupted again", signal=signum)
        result.signal = signum
        name = SIGNAL_NAMES.get(signum, "a signal")
        say(f"interrupted by {name}; passing on the rest of the input (Ctrl-C again to quit now)")

    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    with contextlib.suppress(ValueError):  # not the main thread (a library caller): leave them
        for signum in STOP_SIGNALS:
            signal.signal(signum, on_signal)
    try:
        for record in records:
            write(judge(record))
    except StdoutClosed:
        result.stdout_closed = True
    except Fatal as exc:
        result.fatal = str(exc)
    finally:
        with contextlib.suppress(ValueError):
            for signum, handler in saved.items():
                signal.signal(signum, handler)
    return result


def _llm_judge(caller: Caller, endpoint: Endpoint, config: JudgeConfig) -> LLMJudge:
    """One LLM judge of the run, its cost bounded as the run's (`max_cost`)."""
    from bv.stages.estimate import online_worst_case

    if not config.batch:  # a batch caller bounds its own
        where = first_url(caller.backend.endpoint)
        caller.worst_case = online_worst_case(
            config.price_book, config.max_cost, caller.backend.model, where, config.token_limit, None
        )
    params = judge_params(endpoint, config.judge_params)
    return LLMJudge(
        caller,
        params,
        redaction.public_params(body_fields(params, endpoint.rule)),  # secret-named fields: ***
        config.templates,
        prices=config.price_book,
    )


def read_rollout_rows(inputs: tuple[str, ...], problems: Problems) -> Iterator[RolloutRow]:
    """The rollout rows of JSONL files ("-": stdin), checked, lazily; bad lines to `problems`."""
    return (row for _, row in read_records(inputs, problems, check_rollout_record, fast=True))


def run_judge(
    records: Iterable[RolloutRow],
    config: JudgeConfig,
    write: Callable[[Mapping[str, Any]], None],
    *,
    total: int | None = None,
    in_place: bool = False,
) -> Outcome:
    """The whole stage: judge every row, each to `write` in input order. `total`: how many rows
    there are, for progress (a list's own length by default); `in_place`: the rules judge into them."""
    endpoint = config.endpoint
    backend = None if endpoint is None else make_backend("openai", endpoint=endpoint)
    settings = config.settings
    if total is None and isinstance(records, Sized):
        total = len(records)
    stats = Stats(total=total, spent_usd=config.spent_before)
    stopping = asyncio.Event()
    caller: Caller | None = None
    runner: Callable[..., Outcome] = run_stage
    if backend is not None and config.batch:
        from bv.engine.batch import BatchCaller, run_batch_stage
        from bv.stages.estimate import prompt_token_bound

        limit, bound = config.token_limit, prompt_token_bound(None)
        caller = BatchCaller.for_batches(backend, settings, stats, stopping, "judge", limit, bound)
        runner = run_batch_stage
    elif backend is not None:
        caller = Caller.for_run(backend, settings, stats, stopping)
    templates = config.templates
    llm: LLMJudge | Panel | None = None
    others: list[Caller] = []  # a panel's other judges' callers
    if caller is not None and endpoint is not None:
        judges = [_llm_judge(caller, endpoint, config)]
        for other in config.endpoints[1:]:  # a panel: each judge its own client, one progress line
            other_caller = Caller.for_run(make_backend("openai", endpoint=other), settings, stats, stopping)
            judges.append(_llm_judge(other_caller, other, config))
            others.append(other_caller)
        llm = Panel(judges, config.panel) if others else judges[0]
    version, recorded = judge_version(templates), templates.recorded("judge")
    decided = stats.decided  # rows by who decided; a failed rollout's row is `rollout_error`
    checked = 0  # rows the LLM judge was asked about too (`calibrate`)

    def count(row: JudgedRow) -> JudgedRow:
        nonlocal checked
        checked += "judge_calibration" in row
        stats.done += 1
        stats.instant += row["decided_by"] in ("rules", "rollout_error")  # no request asked
        stats.errors += row["decided_by"] == "error"
        stats.answered += row["extracted"] is not None
        decided["undecided" if row["undecided"] else row["decided_by"]] += 1
        return row

    async def one(record: RolloutRow) -> JudgedRow:
        return count(await judge_one(record, config.mode, llm, version, recorded, config.calibrate))

    unanswered = 0
    if llm is None:  # no progress display: `done` and `answered` are counted once at the end

        def judge_row(record: RolloutRow) -> JudgedRow:
            nonlocal unanswered
            row = judge_by_rules(record, version, recorded, in_place)
            decided["undecided" if row["undecided"] else row["decided_by"]] += 1
            unanswered += row["extracted"] is None
            return row

        outcome = run_by_rules(records, judge_row, write)
        stats.done = decided.total()
        stats.answered = stats.done - unanswered
        notice = config.undecided_notice(decided["undecided"])
        if not settings.quiet:
            say(stats.summary())  # what the progress display says at its end
            if notice:  # only when this run left rows undecided
                say(notice)
    else:
        outcome = runner(
            records,
            one,
            write,
            settings=settings,
            stats=stats,
            label="judge",
            stopping=stopping,
            backend=backend,
            caller=caller,
            drain_on_interrupt=True,
            **({"others": others} if others else {}),
        )
    if config.calibrate and llm is not None and not checked and stats.done and not outcome.interrupted:
        say(unchecked(config.calibrate, stats.done, decided["rules"]))
    outcome.rows, outcome.failed, outcome.carried = stats.done, stats.errors, decided["rollout_error"]
    outcome.failed_what, outcome.spent_usd = "got a judge error", stats.spent_usd
    if llm is not None and caller is not None and caller.cache is not None:
        outcome.cached = stats.decided["llm"]  # the verdicts the cache keeps; rules decide for free
    return outcome
