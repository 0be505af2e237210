"""GEPA (arXiv 2507.19457; the `gepa` package, bv's optional extra `gepa`) searching a skill with
bv's evaluator on bv's split and budget, so that what it finds can be set beside bv's loop.

GEPA rewrites the whole skill from a reflection on a train minibatch, keeps the rewrite when its
minibatch score is strictly higher than its parent's, scores it on the selection split and keeps
a Pareto pool; no statistics decide. bv gives it (docs/optimize.md, "GEPA on bv's evaluator"):

- BvAdapter, gepa's adapter: `evaluate` is bv's rollout and judge of the candidate's `skill`
  component on item ids (a train item once, a selection item --repeats times, its score the mean
  of its finished runs: a failed row is left out and counted, as the gate does, and an item
  with none finished gets the batch's mean, so it neither lifts nor sinks the candidate);
  `make_reflective_dataset` is the attempt fields bv's reflection
  prompt fences (bv.optimize.reflect.attempt_fields), so a hostile reply stays data.
- OptimizerLM, gepa's reflection_lm: GEPA's own reflection prompt sent to bv's optimizer model
  through the rollout stage (the reply cache, retries, tokens counted; no litellm).
- bv's checks on every rewrite before a request is spent on it (bv.optimize.edits.skill_problem:
  the size cap, control characters, a quoted item): a refused one scores 0 and is named.
- The test split, which GEPA never sees; at the end bv's paired comparison of GEPA's best (its
  highest selection score) with the seed on it, as bv's loop ends.

A re-run of the same command replays the search from the reply cache (GEPA's choices follow from
its seed and the replies), so no paid request is sent twice; bv does not load GEPA's pickled
state from a run folder, since unpickling a file runs code."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bv.core.errors import BVError
from bv.core.records import JudgedRow, RolloutRow
from bv.optimize import stage_calls
from bv.optimize.edits import (
    MAX_REPLY_CHARS,
    grader_phrases,
    guarded_items,
    leaks,
    new_grader_phrases,
    quote,
    skill_problem,
)
from bv.optimize.final import final_test
from bv.optimize.gate import estimate, finished_scores
from bv.optimize.guard import confirmed
from bv.optimize.loop import _Loop, with_costs
from bv.optimize.reflect import attempt_fields
from bv.optimize.results import (
    GepaResult,
    OptimizeError,
    OptimizeOptions,
    Plan,
    add_tokens,
    figure,
    tokens_of,
)
from bv.optimize.rundir import RunFolder
from bv.stages.prompt import Skill

if TYPE_CHECKING:
    from gepa import GEPAResult

COMPONENT = "skill"  # the one text component of a candidate


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class _Stop:
    """An interrupt or fatal error met inside GEPA, which catches a reflection's exceptions:
    kept here, GEPA is stopped at its next check, and the search raises it again."""

    def __init__(self) -> None:
        self.error: BVError | None = None

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def __call__(self, gepa_state: Any) -> bool:  # a gepa StopperProtocol
        return self.error is not None


class OptimizerLM:
    """gepa's reflection_lm: a prompt in, the optimizer model's reply out, sent as bv's loop
    sends its reflections (bv.optimize.stage_calls.ask_optimizer). A failed request raises, which GEPA
    counts as a reflection that proposed nothing; an interrupt stops the search."""

    def __init__(self, engines: stage_calls.Engines, stop: _Stop) -> None:
        self.engines, self.stop = engines, stop
        self.rows: list[RolloutRow] = []
        self.reflections: list[dict[str, Any]] = []

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        self.stop.check()
        text = prompt if isinstance(prompt, str) else _text_of(prompt)
        request = f"gepa-reflect-{len(self.reflections)}"
        try:
            [row] = stage_calls.ask_optimizer([(request, text)], self.engines)
        except BVError as exc:
            self.stop.error = exc
            raise
        self.rows.append(row)
        entry: dict[str, Any] = {"request": request, "prompt_sha256": _sha(text)}
        self.reflections.append(entry)
        reply = row.get("response") or ""
        if row.get("error"):
            entry.update(status="optimizer_error", why=quote(row.get("error"), 300))
            raise RuntimeError(f"the optimizer's request failed: {quote(row.get('error'), 300)}")
        if len(reply) > MAX_REPLY_CHARS:
            entry.update(status="oversized_reply", why=f"the reply is over {MAX_REPLY_CHARS // 1024} KiB")
            raise RuntimeError(entry["why"])
        entry["status"] = "ok"
        return reply


def _text_of(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of chat messages (GEPA sends a list only with images, which bv's dataset has none of)."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return "\n\n".join(parts)


def batch_scores(
    rows: Sequence[JudgedRow], batch: Sequence[str]
) -> tuple[dict[str, list[float]], list[float], int]:
    """The scores GEPA sees for `batch`: each item's mean over its finished runs, a failed row left
    out and counted (as the gate does: an outage is no evidence about the skill); an item with no
    finished run gets the mean of the others, which leaves the batch's mean as if it were left
    out (GEPA needs a number per item). Also item -> finished scores, and the failed rows."""
    by_item, failed = finished_scores(rows)
    means = {item: sum(runs_) / len(runs_) for item, runs_ in by_item.items()}
    neutral = sum(means.values()) / len(means) if means else 0.0
    return by_item, [means.get(item, neutral) for item in batch], failed


class BvAdapter:
    """bv's evaluator as a gepa GEPAAdapter (duck-typed: gepa is imported only when it runs)."""

    propose_new_texts = None  # GEPA's own proposer and reflection prompt: GEPA as published

    def __init__(self, loop: _Loop, stop: _Stop, say: Callable[[str], None]) -> None:
        self.loop, self.stop, self.say = loop, stop, say
        self.selection = set(loop.split.selection)
        self.allowed = set(loop.split.train) | self.selection
        self.guarded = guarded_items(loop.items, set(loop.split.train))
        self.seed_leaks = leaks(loop.seed_skill.text, self.guarded)  # the seed's own, not GEPA's doing
        self.rows: list[JudgedRow] = []
        self.refused: dict[str, dict[str, Any]] = {}
        self.warned: set[str] = set()  # candidates said to address the grader
        self.metric_calls = 0
        self.failed_rows = 0  # rows with no verdict, left out of the scores (gepa.json counts them)

    def evaluate(self, batch: list[str], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa.core.adapter import EvaluationBatch

        self.stop.check()
        if not set(batch) <= self.allowed:
            raise OptimizeError("GEPA asked for items outside the train and selection splits")
        text = candidate[COMPONENT].strip()
        sha = _sha(text)
        problem = (
            None
            if text == self.loop.seed_skill.text
            else skill_problem(text, self.guarded, self.loop.options.max_skill_chars, self.seed_leaks)
        )
        flagged = new_grader_phrases(text, self.loop.seed_skill.text)
        if problem is None and flagged:  # a skill that sways the judge would pass every check
            problem = ("addresses_grader", f"it addresses the grader ({', '.join(flagged)})")
        if problem is not None:  # not tried: scores 0, so GEPA keeps its parent; no request spent
            status, why = problem
            if status == "addresses_grader" and sha not in self.warned:  # never in silence
                self.warned.add(sha)
                self.say(f"gepa: skill {sha[:12]} refused untried: {why}")
            self.refused.setdefault(
                sha, {"sha256": sha, "status": status, "why": why, "skill": quote(text, 300)}
            )
            empty: list[Any] = [None] * len(batch)
            return EvaluationBatch(
                outputs=empty, scores=[0.0] * len(batch), trajectories=empty if capture_traces else None,
                num_metric_calls=0,
            )  # fmt: skip
        on_selection = bool(batch) and set(batch) <= self.selection
        repeats = self.loop.options.repeats if on_selection else 1
        part = "selection" if on_selection else "train"
        try:
            rows = stage_calls.rollout_and_judge(
                [self.loop.by_id[i] for i in batch], Skill(f"gepa-{sha[:12]}", text), self.loop.engines,
                repeats, f"gepa {part} ({sha[:12]})",
            )  # fmt: skip
        except BVError as exc:
            self.stop.error = exc
            raise
        self.rows += rows
        self.metric_calls += len(rows)
        by_item, item_scores, failed = batch_scores(rows, batch)
        self.failed_rows += failed
        first = {str(r["id"]): r for r in reversed(rows)}
        left_out = f"; {failed} failed rows left out" if failed else ""
        if on_selection:
            e = estimate(by_item)
            lo, hi = e["ci95"]
            self.say(
                f"gepa: skill {sha[:12]}: selection {figure(e['accuracy'])} [{figure(lo)}, {figure(hi)}]"
                f" over {e['n_items']} items ({self.metric_calls} target rollouts so far{left_out})"
            )
        elif failed:
            self.say(f"gepa: skill {sha[:12]}: train minibatch{left_out}")
        return EvaluationBatch(
            outputs=[{"id": i, "scores": by_item.get(i, [])} for i in batch],
            scores=item_scores,
            trajectories=[first.get(i) for i in batch] if capture_traces else None,
            num_metric_calls=len(rows),
        )

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> dict[str, list[dict[str, str]]]:
        """Every attempt of the minibatch (GEPA's method; bv's loop sends the failures and a share
        of the successes), in bv's fenced fields; a row whose rollout or judging failed says
        nothing about the skill and is left out."""
        records = [
            attempt_fields(row)
            for row in eval_batch.trajectories or []
            if row is not None and not row.get("error") and row.get("hard") is not None
        ]
        return {name: records for name in components_to_update if records}


def default_budget(options: OptimizeOptions, train: int, selection: int, steps: int) -> int:
    """The target rollouts bv's loop plans on train and selection in `steps` steps: each step's
    batch and gate, and the seed's selection score (the test split is neither's budget)."""
    gate = selection * options.repeats
    return (min(options.batch_size, train) + gate) * steps + gate


def _budget(loop: _Loop, max_metric_calls: int | None) -> int:
    if max_metric_calls is None:
        o = loop.options
        return default_budget(o, len(loop.split.train), len(loop.split.selection), loop.total)
    if max_metric_calls < 1:
        raise OptimizeError("`max_metric_calls` (GEPA's budget) must be at least 1")
    return max_metric_calls


def dry_run(
    items_path: Path,
    seed_skill: Skill,
    out: Path,
    engines: stage_calls.Engines,
    options: OptimizeOptions,
    *,
    max_metric_calls: int | None = None,
) -> Plan:
    """A GEPA search's shape and request bound; nothing sent or written. The budget is checked
    between iterations, so the bound adds one iteration past it (a minibatch pair and a
    selection scoring); each iteration reflects at most once, on a minibatch of rollouts."""
    configs = stage_calls.checked_configs(engines)
    loop = _Loop(items_path, seed_skill, RunFolder(out), engines, options, lambda line: None)
    budget = _budget(loop, max_metric_calls)
    rollouts = budget + 2 * options.minibatch + len(loop.split.selection) * options.repeats
    target = rollouts + 2 * len(loop.split.test) * options.repeats
    judged = engines.mode != "rules" and engines.judge.model
    plan = Plan(
        split={p: len(loop.split.part(p)) for p in ("train", "selection", "test")},
        steps=0,
        steps_done=0,
        requests={
            "target": target * engines.max_turns,
            "judge": target if judged else 0,
            "optimizer": math.ceil(rollouts / options.minibatch),
        },
        search=f"GEPA: a budget of {budget} target rollouts on train and selection",
        detection=loop.detection(None),
    )
    return with_costs(loop, plan, configs)


def search(
    items_path: Path,
    seed_skill: Skill,
    out: Path,
    engines: stage_calls.Engines,
    options: OptimizeOptions,
    *,
    max_metric_calls: int | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> GepaResult:
    """Run (or replay) GEPA on bv's split in the run folder `out`, then compare its best skill
    with the seed on the test split. `max_metric_calls`, the budget, counts target rollouts (a
    selection item's repeats each count; GEPA's own counter counts an item once), checked
    between GEPA's iterations as GEPA checks its own; it defaults to what bv's loop with the
    same options plans (default_budget). The folder is this run's alone meanwhile."""
    try:
        import gepa
    except ImportError:
        raise OptimizeError(
            "the GEPA search needs the gepa package: pip install 'babyvision-bv[gepa]'"
        ) from None
    stage_calls.checked_configs(engines)  # an unpriced `max_cost`: refused before the folder is touched
    with RunFolder(out).owned():
        return _search(items_path, seed_skill, out, engines, options, max_metric_calls, say, gepa)


def _search(
    items_path: Path,
    seed_skill: Skill,
    out: Path,
    engines: stage_calls.Engines,
    options: OptimizeOptions,
    max_metric_calls: int | None,
    say: Callable[[str], None],
    gepa: Any,
) -> GepaResult:
    from bv.optimize.report import gepa_page, gepa_report

    folder = RunFolder(out)
    loop = _Loop(items_path, seed_skill, folder, engines, options, say)
    loop.identity["search"] = {"name": "gepa", "gepa": getattr(gepa, "__version__", "unknown")}
    loop.open_folder()
    budget = _budget(loop, max_metric_calls)
    say(f"split: {loop._sizes()}; GEPA with a budget of {budget} target rollouts")
    for line in loop.detection(None):
        say(line)
    stop = _Stop()
    adapter = BvAdapter(loop, stop, say)
    lm = OptimizerLM(loop.engines, stop)
    outcome: GEPAResult[Any, Any] = gepa.optimize(
        seed_candidate={COMPONENT: loop.seed_skill.text},
        trainset=list(loop.split.train),
        valset=list(loop.split.selection),
        adapter=adapter,
        reflection_lm=lm,
        reflection_minibatch_size=options.minibatch,
        stop_callbacks=[stop, lambda state: adapter.metric_calls >= budget],
        logger=_Log(folder.path / "gepa.log"),
        seed=options.split_seed,
        raise_on_exception=True,
    )
    stop.check()
    pool: list[dict[str, Any]] = []
    for index, candidate in enumerate(outcome.candidates):
        text = candidate[COMPONENT].strip()
        sha = _sha(text)
        file = f"skills/gepa-{index:03d}-{sha[:12]}.md"
        if not (folder.path / file).exists():
            folder.write_text(file, text + "\n")
        pool.append({
            "index": index, "sha256": sha, "file": file, "parents": outcome.parents[index],
            "selection": outcome.val_aggregate_scores[index],
            "found_after_metric_calls": outcome.discovery_eval_counts[index],
            "addresses_grader": grader_phrases(text) if index else [],  # flagged, as the loop's
        })  # fmt: skip
    best_index = outcome.best_idx
    best = Skill(Path(pool[best_index]["file"]).stem, outcome.candidates[best_index][COMPONENT].strip())
    test = final_test(folder, loop.seed_skill, best, options, loop.evaluate)
    search_tokens = tokens_of(adapter.rows, lm.rows)
    record = {
        "search": "gepa",
        "budget": budget,
        "metric_calls": adapter.metric_calls,
        "gepa_metric_calls": outcome.total_metric_calls,  # GEPA's count: an item's repeats once
        "best": best_index,
        "pool": pool,
        "refused": list(adapter.refused.values()),
        "failed_rows": adapter.failed_rows,  # left out of the scores GEPA saw
        "reflections": lm.reflections,
        "tokens": search_tokens,
    }
    folder.write_json("gepa.json", record)
    handed_back = loop.seed_skill if not confirmed(test) else best
    folder.write_text("best.md", handed_back.text + "\n")
    result = GepaResult(
        out=out,
        seed_skill=loop.seed_skill,
        best_skill=best,
        handed_back=handed_back,
        best_candidate=best_index,
        candidates=len(pool),
        proposals=len(lm.reflections),
        metric_calls=adapter.metric_calls,
        budget=budget,
        selection={"accuracy": pool[best_index]["selection"]},
        test=test,
        tokens=add_tokens([record, test]),
        search=record,
    )
    folder.write_text("report.md", gepa_report(result, loop.identity))
    folder.write_text("report.html", gepa_page(result, loop.identity))
    loop.problems.finish()
    return result


class _Log:
    """GEPA's log lines, to RUN/gepa.log (never stdout, which is data), control characters escaped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")

    def log(self, message: str) -> None:
        from bv.optimize.reflect import as_data

        with self.path.open("a", encoding="utf-8") as f:
            f.write(as_data(str(message), 20_000) + "\n")
