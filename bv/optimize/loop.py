"""The loop of `bv optimize` (docs/optimize.md): split the items, then step by step roll out a
train batch with the current skill, reflect on it with the optimizer model, apply the edits that
pass their checks and gate the candidate on the selection split with a paired test; at the end
compare the best skill with the seed on the test split, which nothing before has touched.

Every step is a pure function of the run's settings and the replies (which the reply cache
keeps), and its history row is written once it is finished: a re-run after a crash or a kill
reads the rows back and goes on from the first unfinished step, with no paid request sent twice.
A run stopped before its end (Ctrl-C, SIGTERM, the cost limit: every role's spend over the run)
writes a `stopped` row to the history and an incomplete report, and raises Interrupted again."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bv.core.errors import Interrupted
from bv.core.items import parse_item
from bv.core.jsonl import Problems, read_records
from bv.core.records import Item, JudgedRow
from bv.core.templates import names as template_names
from bv.optimize import stage_calls
from bv.optimize.budget import planned_steps, refreshes
from bv.optimize.detect import detection_lines
from bv.optimize.edits import ReplyProblem, guarded_items, new_grader_phrases, propose, quote, read_reply
from bv.optimize.edits import recorded as recorded_edits
from bv.optimize.final import final_test
from bv.optimize.gate import decide, estimate, finished_scores
from bv.optimize.guard import confirmed, finished, used_up
from bv.optimize.history import best_after, current_scores, rejections
from bv.optimize.reflect import minibatches, reflection_prompt
from bv.optimize.results import (
    OptimizeError,
    OptimizeOptions,
    OptimizeResult,
    Plan,
    accuracy_of,
    add_tokens,
    seed_line,
    step_line,
    tokens_of,
)
from bv.optimize.rundir import RunFolder
from bv.optimize.split import Split, read_split, stratified_split
from bv.stages.prompt import Skill
from bv.tracking.options import TrackOptions

__all__ = ["OptimizeError", "OptimizeOptions", "OptimizeResult", "Plan", "dry_run", "optimize"]


def load_items(path: Path, problems: Problems) -> list[Item]:
    items = [item for _, item in read_records((str(path),), problems, parse_item)]
    seen: set[str] = set()
    for item in items:
        item["id"] = str(item["id"])
        if item["id"] in seen:
            raise OptimizeError(
                f"{path}: item id {quote(item['id'], 80)} appears twice; a split needs unique ids"
            )
        seen.add(item["id"])
    if not items:
        raise OptimizeError(f"{path}: no items")
    return items


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _order(seed: int, epoch: int, ids: Sequence[str]) -> list[str]:
    return sorted(ids, key=lambda i: _sha(f"{seed}\0epoch {epoch}\0{i}"))


class _Loop:
    """One run of the loop over a run folder (resuming what it holds)."""

    def __init__(
        self,
        items_path: Path,
        seed_skill: Skill,
        folder: RunFolder,
        engines: stage_calls.Engines,
        options: OptimizeOptions,
        say: Callable[[str], None],
    ) -> None:
        self.problems = Problems()
        self.items = load_items(items_path, self.problems)
        self.by_id = {item["id"]: item for item in self.items}
        self.folder, self.options, self.say = folder, options, say
        self.engines = engines if engines.image_root else replace(engines, image_root=items_path.parent)
        self.seed_skill = Skill(seed_skill.name, seed_skill.text.strip())
        if len(self.seed_skill.text) > options.max_skill_chars:
            raise OptimizeError(
                f"the seed skill is {len(self.seed_skill.text)} characters,"
                f" over `max_skill_chars` {options.max_skill_chars}"
            )
        if options.split is not None:
            self.split: Split = read_split(options.split, list(self.by_id))
        else:
            self.split = stratified_split(
                {i["id"]: i["subtype"] for i in self.items}, options.ratio, options.split_seed
            )
        if not self.split.train or not self.split.selection or not self.split.test:
            raise OptimizeError(
                f"the split leaves a part empty ({self._sizes()}); give more items or another `ratio`"
            )
        self.guarded = guarded_items(self.items, set(self.split.train))
        self.per_epoch = math.ceil(len(self.split.train) / options.batch_size)
        sizes = (len(self.split.train), len(self.split.selection), len(self.split.test))
        self.total = planned_steps(options, *sizes)
        self.identity = self._identity(items_path)

    def _sizes(self) -> str:
        return ", ".join(f"{len(self.split.part(p))} {p}" for p in ("train", "selection", "test"))

    def _identity(self, items_path: Path) -> dict[str, Any]:
        """What run.json holds. Every key but `endpoints` must match for a re-run to resume: a
        model may be served elsewhere on a re-run (the cache keys a model's replies by its name, so
        they are still found; rows record the endpoint that made each)."""
        templates = self.engines.templates
        judge = self.engines.judge.recorded() if self.engines.mode != "rules" else {}
        endpoints = {
            role: list(model.base_url)
            for role, model in (
                ("target", self.engines.target),
                ("optimizer", self.engines.optimizer),
                ("judge", self.engines.judge),
            )
        }
        return {
            "items_sha256": hashlib.sha256(items_path.read_bytes()).hexdigest(),
            "seed_skill_sha256": self.seed_skill.sha256,
            "split": self.split.to_json(),
            "options": self.options.identity(),
            "target": {**self.engines.target.recorded(), "max_turns": self.engines.max_turns},
            "optimizer": self.engines.optimizer.recorded(),
            "judge": {"mode": self.engines.mode, **judge},
            **({"test_judge": self.engines.test_judge.recorded()} if self.engines.test_judge else {}),
            "templates": {name: templates.sha256(name) for name in template_names()},
            "endpoints": endpoints,
        }

    def plan(self, done: int) -> Plan:
        o, turns = self.options, self.engines.max_turns
        selection, test = len(self.split.selection), len(self.split.test)
        steps = max(0, self.total - max(done - 1, 0))
        batch = min(o.batch_size, len(self.split.train))
        rescored = refreshes(o, steps) * selection * o.repeats
        rollouts = (batch + selection * o.repeats) * steps + rescored + (selection + 2 * test) * o.repeats
        return Plan(
            split={p: len(self.split.part(p)) for p in ("train", "selection", "test")},
            steps=self.total,
            steps_done=max(done - 1, 0),
            requests={
                "target": rollouts * turns,
                "judge": rollouts if self.engines.mode != "rules" and self.engines.judge.model else 0,
                "optimizer": math.ceil(batch / o.minibatch) * steps,
            },
            detection=self.detection(o.gate),
        )

    def detection(self, gate: str | None) -> tuple[str, ...]:
        """What the split can detect (bv.optimize.detect); gate None for a GEPA search."""
        o = self.options
        sizes = len(self.split.selection), len(self.split.test)
        lines = detection_lines(*sizes, o.repeats, gate, o.alpha)
        if gate is not None and self.total == 0 and o.steps is None and o.epochs is None:
            fixed = (sizes[0] + 2 * sizes[1]) * o.repeats
            lines.append(
                f"warning: a `budget` of {o.budget} target rollouts leaves no step after the seed's"
                f" score and the test comparison ({fixed}): give a larger `budget`"
            )
        return tuple(lines)

    # --- the run folder -----------------------------------------------------------------------
    def open_folder(self) -> list[dict[str, Any]]:
        """The history so far; the folder's identity written, or checked against this run's."""
        self.folder.open(self.identity, self.split.to_json())
        return self.folder.history()

    def skill_of(self, ref: Mapping[str, Any]) -> Skill:
        return Skill(Path(ref["file"]).stem, self.folder.read_skill(ref["file"], ref["sha256"]))

    # --- one evaluation -----------------------------------------------------------------------
    def evaluate(
        self, part: str, skill: Skill, repeats: int, what: str
    ) -> tuple[list[JudgedRow], dict[str, list[float]], int]:
        """The rows, the scores of the finished ones and how many failed (left out, not scored 0)."""
        engines = stage_calls.for_part(self.engines, part)
        rows = stage_calls.rollout_and_judge(
            [self.by_id[i] for i in self.split.part(part)], skill, engines, repeats, what
        )
        return (rows, *finished_scores(rows))

    def seed_row(self) -> dict[str, Any]:
        skill = self.seed_skill
        file = self.folder.write_skill(0, skill.sha256, skill.text)
        rows, seed_scores, failed = self.evaluate(
            "selection", skill, self.options.repeats, "seed on selection"
        )
        ref = {"sha256": skill.sha256, "file": file}
        selection = estimate(seed_scores)
        return {
            "step": 0,
            "kind": "seed",
            "skill": ref,
            "selection": selection,
            "best": {**ref, "step": 0, "accuracy": selection["accuracy"]},
            "scores": seed_scores,
            "failed_rows": failed,
            "tokens": tokens_of(rows, []),
        }

    def step_row(self, step: int, history: list[dict[str, Any]]) -> dict[str, Any]:
        """Step `step` (1-based) from the state the history leaves."""
        last = history[-1]
        current_ref = last["skill"]
        current = self.skill_of(current_ref)
        scores_now, current_failed = current_scores(history)
        epoch, position = divmod(step - 1, self.per_epoch)
        order = _order(self.options.split_seed, epoch, self.split.train)
        batch_ids = order[position * self.options.batch_size : (position + 1) * self.options.batch_size]
        batch = [self.by_id[i] for i in batch_ids]
        train_rows = stage_calls.rollout_and_judge(batch, current, self.engines, 1, f"step {step}: train")
        groups, failures, successes = minibatches(
            train_rows,
            self.options.minibatch,
            self.options.success_share,
            f"{self.options.split_seed}:{step}",
        )
        requests = [
            (
                f"step{step}-mb{k}",
                reflection_prompt(current.text, g, self.options.edits, self.engines.templates),
            )
            for k, g in enumerate(groups)
        ]
        replies = stage_calls.ask_optimizer(requests, self.engines)
        reflections, operations = [], []
        for (request_id, _), reply in zip(requests, replies, strict=True):
            entry: dict[str, Any] = {"request": request_id}
            if reply.get("error"):
                entry.update(status="optimizer_error", why=quote(reply["error"], 300))
            else:
                try:
                    ops = read_reply(reply["response"])
                    operations.append(ops)
                    entry.update(status="ok", operations=len(ops))
                except ReplyProblem as problem:
                    entry.update(
                        status=problem.kind, why=str(problem), reply=quote(reply["response"] or "", 300)
                    )
            reflections.append(entry)
        text, checked = propose(
            current.text, operations, self.guarded, self.options.max_skill_chars, self.options.edits
        )
        text = text.strip()
        edits, not_recorded = recorded_edits(checked)
        row: dict[str, Any] = {
            "step": step,
            "kind": "step",
            "epoch": epoch + 1,
            "skill_before": current_ref,
            "train": {
                "items": len(batch),
                "accuracy": accuracy_of(train_rows),
                "failures": failures,
                "successes_sent": successes,
                "errors": sum(1 for r in train_rows if r.get("error") or r.get("hard") is None),
            },
            "reflections": reflections,
            "edits": edits,
            "proposed": sum(c.count for c in checked),
            "passed_checks": sum(c.status in ("applied", "over_step", "conflict") for c in checked),
            "applied": sum(c.status == "applied" for c in checked),
            "candidate": None,
            "gate": None,
            "accepted": False,
        }
        if not_recorded:
            row["edits_not_recorded"] = not_recorded  # by status: past the first MAX_RECORDED
        flagged = new_grader_phrases(text, current.text)
        if flagged:  # refused untried: never gated, so never kept or handed back
            row["addresses_grader"] = flagged
        selection_rows: list[JudgedRow] = []
        failed = 0
        chosen_ref, chosen_scores = current_ref, scores_now
        if text != current.text and not flagged:
            sha = _sha(text)
            ref = {"sha256": sha, "file": self.folder.write_skill(step, sha, text)}
            candidate = Skill(Path(ref["file"]).stem, text)
            selection_rows, candidate_scores, failed = self.evaluate(
                "selection", candidate, self.options.repeats, f"step {step}: gate"
            )
            decision = decide(
                scores_now,
                candidate_scores,
                self.options.gate,
                self.options.alpha,
                decision=1 + sum(1 for r in history if r.get("gate")),
                failed=(current_failed, failed),
            )
            row.update(
                candidate=ref,
                gate=decision.to_json(),
                accepted=decision.accepted,
                selection={"current": estimate(scores_now), "candidate": estimate(candidate_scores)},
            )
            if decision.accepted:
                chosen_ref, chosen_scores = ref, candidate_scores
            elif self.options.refresh and (1 + rejections(history)) % self.options.refresh == 0:
                rescored, fresh, fresh_failed = self.evaluate(
                    "selection", current, self.options.repeats, f"step {step}: current skill again"
                )
                selection_rows += rescored
                pooled = {i: [*scores_now.get(i, []), *fresh.get(i, [])] for i in {*scores_now, *fresh}}
                row["refresh"] = {"scores": fresh, "failed_rows": fresh_failed, "pooled": estimate(pooled)}
        row["skill"] = chosen_ref
        if row["accepted"]:
            row["scores"], row["failed_rows"] = chosen_scores, failed
        row["best"] = best_after(self.options.gate, last["best"], row, chosen_ref, chosen_scores)
        row["tokens"] = tokens_of(train_rows + selection_rows, replies)
        return row


def optimize(
    items_path: Path,
    seed_skill: Skill,
    out: Path,
    engines: stage_calls.Engines,
    options: OptimizeOptions,
    *,
    say: Callable[[str], None] = lambda line: None,
    track: TrackOptions | None = None,
) -> OptimizeResult:
    """Run (or resume) the loop in the run folder `out` (this run's alone meanwhile) and return
    what it found; `track`: the experiment trackers each step is logged to (bv.tracking). What a
    role's config refuses (an unpriced `max_cost`) is refused first, before the folder is made or
    written."""
    stage_calls.checked_configs(engines)
    with RunFolder(out).owned():
        return _optimize(items_path, seed_skill, out, engines, options, say, track)


def _optimize(
    items_path: Path,
    seed_skill: Skill,
    out: Path,
    engines: stage_calls.Engines,
    options: OptimizeOptions,
    say: Callable[[str], None],
    track: TrackOptions | None = None,
) -> OptimizeResult:
    from bv.optimize.report import record_stop, write_reports
    from bv.tracking.runs import end_optimize, log_steps, open_optimize

    folder = RunFolder(out)
    loop = _Loop(items_path, seed_skill, folder, engines, options, say)
    history = loop.open_folder()
    test = folder.read_json("test.json")
    if finished(test) and loop.total > len(history) - 1:  # more steps asked of a finished run
        raise OptimizeError(used_up(test))
    say(f"split: {loop._sizes()}; {loop.total} steps, {max(len(history) - 1, 0)} already finished")
    for line in loop.detection(options.gate):
        say(line)
    tracking = open_optimize(out, track, loop.identity)
    log_steps(tracking, out, history)  # what an earlier run logged is not logged again
    try:
        if not history:
            history.append(loop.seed_row())
            folder.append_history(history[-1])
            log_steps(tracking, out, history)
            say(seed_line(history[-1]))
        for step in range(len(history), loop.total + 1):
            row = loop.step_row(step, history)
            folder.append_history(row)
            history.append(row)
            log_steps(tracking, out, history)
            say(step_line(row, loop.total))
        best_ref = history[-1]["best"]
        best = loop.skill_of(best_ref)
        test = final_test(folder, loop.seed_skill, best, options, loop.evaluate)
    except Interrupted as exc:  # said in the history (a `stopped` row) and an incomplete report
        spent = loop.engines.spend.usd if loop.engines.sending.prices is not None else None
        where = record_stop(folder, history, loop.identity, loop.split, loop.total, str(exc), spent)
        tracking.finish("KILLED")
        raise Interrupted(f"{exc}; {where}", signal=exc.signal) from None
    except BaseException:
        tracking.finish("FAILED")
        raise
    handed_back = loop.seed_skill if not confirmed(test) else best
    folder.write_text("best.md", handed_back.text + "\n")
    result = OptimizeResult(
        out=out,
        steps=len(history) - 1,
        accepted=sum(1 for r in history if r.get("accepted")),
        seed_skill=loop.seed_skill,
        best_skill=best,
        handed_back=handed_back,
        best_step=best_ref["step"],
        selection={"accuracy": best_ref["accuracy"]},
        test=test,
        tokens=add_tokens([*history, test]),
        history=history,
    )
    write_reports(folder, result, loop.identity, loop.split)
    end_optimize(tracking, out, test, rows_failed=any(result.failed_rows.values()))
    loop.problems.finish()
    return result


def dry_run(
    items_path: Path, seed_skill: Skill, out: Path, engines: stage_calls.Engines, options: OptimizeOptions
) -> Plan:
    """The run's shape, its request bound and what those requests would cost, from the items and
    the run folder; nothing sent or written."""
    configs = stage_calls.checked_configs(engines)
    folder = RunFolder(out)
    loop = _Loop(items_path, seed_skill, folder, engines, options, lambda line: None)
    return with_costs(loop, loop.plan(folder.finished_rows()), configs)


def with_costs(loop: _Loop, plan: Plan, configs: stage_calls.Configs) -> Plan:
    """The plan with what its requests would cost by role (bv.optimize.plan_cost), for either search."""
    from bv.optimize.plan_cost import plan_costs

    train = [loop.by_id[i] for i in loop.split.part("train")]
    reflecting = (loop.options.minibatch, loop.options.edits)
    costs = plan_costs(loop.items, train, loop.seed_skill, loop.engines, reflecting, plan.requests, configs)
    return replace(plan, costs=tuple(costs))
