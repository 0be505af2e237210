"""What `bv optimize` takes and gives: its options, its dry-run plan, its result, the tokens
by role and the progress lines; bv.api and bv/cli build and read these."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bv.core.errors import BVError
from bv.core.records import JudgedRow
from bv.core.settings import check, setting, share
from bv.optimize.edits import DEFAULT_MAX_SKILL_CHARS
from bv.optimize.gate import GATES
from bv.optimize.reflect import count_fields
from bv.optimize.split import DEFAULT_RATIO
from bv.reporting.costs import COST_UNITS, is_usd, usd
from bv.stages.prompt import Skill

ROLES = ("target", "judge", "optimizer")


class OptimizeError(BVError, ValueError):
    """Settings or a run folder `bv optimize` cannot use; said to the user, who fixes them."""


def ratio_of(given: str | Sequence[int]) -> tuple[int, int, int]:
    """A ratio as either face gives it: "2:1:7" (the command line's) or (2, 1, 7)."""
    from bv.optimize.split import parse_ratio

    if not isinstance(given, str):
        return (int(given[0]), int(given[1]), int(given[2]))
    try:
        return parse_ratio(given)
    except ValueError as exc:
        raise OptimizeError(f"`ratio`: {exc}") from None


@dataclass(frozen=True)
class OptimizeOptions:
    """The loop's settings, each declared once (bv.core.settings): the split, the steps, the
    gate, and what a skill may grow to."""

    ratio: tuple[int, int, int] = setting(
        ":".join(map(str, DEFAULT_RATIO)),
        "--ratio",
        convert=ratio_of,
        show_default=True,
        help="train:selection:test, stratified by subtype.",
    )
    split: Path | None = setting(  # a split file, instead of one drawn
        None,
        "--split",
        kind=Path,
        exists=True,
        help='A split to use instead: {"train": [ids], "selection": [...], "test": [...]}.',
    )
    split_seed: int = setting(
        0,
        "--split-seed",
        kind=int,
        show_default=True,
        help="Seed of the split, the batch order and the successes sent.",
    )
    budget: int = setting(
        3200,
        "--budget",
        kind=int,
        low=1,
        show_default=True,
        help="Target rollouts for the whole run: the seed's score, the test comparison and as many"
        " steps as fit between them (unless --steps or --epochs is given).",
    )
    epochs: int | None = setting(
        None, "--epochs", kind=int, low=1, help="Passes over the train split, instead of the budget's steps."
    )
    steps: int | None = setting(
        None,
        "--steps",
        kind=int,
        low=0,
        help="This many steps in all, instead of the budget's or the epochs'.",
    )
    batch_size: int = setting(
        64, "--batch-size", kind=int, low=1, show_default=True, help="Train items rolled out per step."
    )
    minibatch: int = setting(
        8, "--minibatch", kind=int, low=1, show_default=True, help="Attempts per optimizer request."
    )
    success_share: float = setting(
        0.25,
        "--success-share",
        kind=float,
        convert=share,
        show_default=True,
        help="Share of a batch's successes shown to the optimizer.",
    )
    edits: int = setting(  # the step size
        4, "--edits", kind=int, low=1, show_default=True, help="Step size: edits applied at most per step."
    )
    alpha: float = setting(
        0.05,
        "--alpha",
        kind=float,
        low=0,
        high=1,
        open_bounds=True,
        show_default=True,
        help="The run's error rate: the chance that the skill handed back is worse than the seed, or"
        " that the run reports a gain that is not there: the test split confirms at this level.",
    )
    gate: str = setting(
        "greater",
        "--gate",
        choices=GATES,
        show_default=True,
        help="greater: keep a candidate that scores higher on selection; paired: only one an exact"
        " paired test finds better (the j-th decision at alpha/2^j).",
    )
    refresh: int = setting(
        4,
        "--refresh",
        kind=int,
        low=0,
        show_default=True,
        help="After this many rejected candidates in a row, score the current skill on selection"
        " again and pool the runs (0: never).",
    )
    repeats: int = setting(
        1,
        "--repeats",
        kind=int,
        low=1,
        high=100,
        show_default=True,
        help="Runs per item on the selection and test splits.",
    )
    max_skill_chars: int = setting(
        DEFAULT_MAX_SKILL_CHARS,
        "--max-skill-chars",
        kind=int,
        low=1,
        show_default=True,
        help="Skill size cap.",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "ratio", ratio_of(self.ratio))
        object.__setattr__(self, "success_share", share(self.success_share))
        if isinstance(self.split, str):
            object.__setattr__(self, "split", Path(self.split))
        check(self)

    def identity(self) -> dict[str, Any]:
        """What determines each step's result (not the budget: --steps and --epochs may grow on a re-run)."""
        out = asdict(self)
        for budget in ("budget", "epochs", "steps", "split"):
            out.pop(budget)
        out["ratio"] = list(self.ratio)
        return out


@dataclass(frozen=True)
class Plan:
    """What --dry-run prints: the run's shape and the most requests it can send, by role."""

    split: dict[str, int]
    steps: int
    steps_done: int
    requests: dict[str, int]
    search: str | None = None  # a GEPA search's budget, said instead of the steps
    costs: tuple[str, ...] = ()  # what those requests would cost, by role (bv.optimize.plan_cost)
    detection: tuple[str, ...] = ()  # what the split can detect (bv.optimize.detect)

    def lines(self) -> list[str]:
        s = self.split
        out = [
            f"split: {s['train']} train, {s['selection']} selection, {s['test']} test items",
            self.search or f"steps: {self.steps} ({self.steps_done} already finished in this run folder)",
        ]
        out += [
            f"{role}: at most {n} requests (fewer where the reply cache has them)"
            for role, n in self.requests.items()
        ]
        return out + list(self.detection) + list(self.costs)


def improved_on_test(test: Mapping[str, Any]) -> bool:
    """Whether the test split confirmed the best skill, which is then handed back (bv.optimize.guard)."""
    return (test.get("handed_back") or {}).get("skill") == "best"


@dataclass(frozen=True)
class OptimizeResult:
    """What a run found: the best skill on selection, it against the seed on test (the headline),
    and the skill handed back (best.md): the best skill when the test split confirmed it, else the
    seed."""

    out: Path
    steps: int
    accepted: int
    seed_skill: Skill
    best_skill: Skill  # the best on selection
    handed_back: Skill  # what best.md holds
    best_step: int
    selection: dict[str, Any]  # the best skill's selection score (accuracy, ci95, n_items)
    test: dict[str, Any]  # {"seed": estimate, "best": estimate, "comparison": paired figures}
    tokens: dict[str, dict[str, float]]  # by role, over the whole run
    history: list[dict[str, Any]] = field(repr=False)

    @property
    def improved(self) -> bool:
        return improved_on_test(self.test)

    @property
    def failed_rows(self) -> dict[str, int]:
        """Rows with no verdict by split, left out of every figure: a run with any exits 1."""
        return {
            "train": sum(_whole(r.get("train") or {}, "errors") for r in self.history),
            "selection": sum(
                _whole(r, "failed_rows")
                if r.get("kind") == "seed"
                else _whole((r.get("gate") or {}).get("failed_rows") or {}, "candidate")
                + _whole(r.get("refresh") or {}, "failed_rows")
                for r in self.history
            ),
            "test": _whole(self.test, "failed_rows"),
        }


@dataclass(frozen=True)
class GepaResult:
    """What the search found: GEPA's best skill on selection, it against the seed on test, and
    the skill handed back (best.md), as OptimizeResult's."""

    out: Path
    seed_skill: Skill
    best_skill: Skill
    handed_back: Skill
    best_candidate: int  # its index in GEPA's pool (0: the seed)
    candidates: int  # the pool's size, the seed included
    proposals: int  # reflections sent to the optimizer
    metric_calls: int  # target rollouts GEPA spent on train and selection (the budget's unit)
    budget: int
    selection: dict[str, Any]
    test: dict[str, Any]
    tokens: dict[str, dict[str, float]]
    search: dict[str, Any] = field(repr=False)

    @property
    def improved(self) -> bool:
        return improved_on_test(self.test)

    @property
    def failed_rows(self) -> dict[str, int]:
        """Rows with no verdict: the search's (train and selection, gepa.json) and the test's."""
        return {"search": _whole(self.search, "failed_rows"), "test": _whole(self.test, "failed_rows")}


def accuracy_of(rows: Sequence[JudgedRow]) -> float | None:
    return sum(1 for r in rows if r.get("hard") == 1) / len(rows) if rows else None


def tokens_of(
    target_rows: Sequence[Mapping[str, Any]], optimizer_rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Requests, cache hits and tokens by role. The judge's are its LLM verdicts and their
    tokens (`judge_usage`); how many of them the cache gave is not in a judged row (a re-judge
    writes the same rows), so the judge has no `cached` count."""

    def total(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        out = {"requests": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for row in rows:
            for key, value in count_fields(dict(row)).items():
                out[key] += value
        return out

    judged = [r for r in target_rows if r.get("decided_by") == "llm" or r.get("judge_usage")]
    return {
        "target": {**total(target_rows), **cost_of(target_rows, "cost_usd", "price_source")},
        "judge": {
            "requests": len(judged),
            "prompt_tokens": sum(_count(r, "prompt_tokens") for r in judged),
            "completion_tokens": sum(_count(r, "completion_tokens") for r in judged),
            **cost_of(judged, "judge_cost_usd", "judge_price_source"),
        },
        "optimizer": {**total(optimizer_rows), **cost_of(optimizer_rows, "cost_usd", "price_source")},
    }


def cost_of(rows: Sequence[Mapping[str, Any]], cost: str, source: str) -> dict[str, float]:
    """What the rows' replies cost in USD, cached ones too as their tokens are counted, and how
    many priced rows have no known cost; nothing when no row was priced (no `prices`)."""
    priced = [r for r in rows if r.get(source) is not None]
    if not priced:
        return {}
    known = [round(r[cost] * COST_UNITS) for r in priced if is_usd(r.get(cost))]
    return {"cost_usd": usd(sum(known)), "cost_unknown": len(priced) - len(known)}


def _whole(record: Mapping[str, Any], key: str) -> int:
    """A count a run folder's JSON holds; anything but a whole number >= 0 is 0."""
    value = record.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _count(row: Mapping[str, Any], key: str) -> int:
    value = (row.get("judge_usage") or {}).get(key, 0)
    return value if isinstance(value, int) and value >= 0 else 0


def add_tokens(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """The rows' `tokens` summed by role (a count no row of a role has stays absent; a cost
    summed in bv.reporting.costs' whole units, as each step's is)."""
    out: dict[str, dict[str, float]] = {role: {} for role in ROLES}
    for row in rows:
        for role, counts in (row.get("tokens") or {}).items():
            for key, value in counts.items():
                step = round(value * COST_UNITS) if key == "cost_usd" else value
                out[role][key] = out[role].get(key, 0) + step
    for counts in out.values():
        if "cost_usd" in counts:
            counts["cost_usd"] = usd(int(counts["cost_usd"]))
    return out


def figure(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def seed_line(row: Mapping[str, Any]) -> str:
    s = row["selection"]
    lo, hi = s["ci95"]
    interval = f"[{figure(lo)}, {figure(hi)}]"
    return f"step 0 (seed): selection {figure(s['accuracy'])} {interval} over {s['n_items']} items"


def step_line(row: Mapping[str, Any], total: int) -> str:
    """A finished step in one line; a candidate refused for addressing the grader says so."""
    flagged = row.get("addresses_grader")
    if flagged and row.get("gate") is None:
        head = _step_line(row, total).removesuffix("; no candidate")
        return f"{head}; refused untried: the candidate addresses the grader ({', '.join(flagged)})"
    warning = f"; warning: the candidate addresses the grader ({', '.join(flagged)})" if flagged else ""
    return _step_line(row, total) + warning


def _step_line(row: Mapping[str, Any], total: int) -> str:
    head = f"step {row['step']}/{total}: {row['proposed']} edits proposed, {row['applied']} applied"
    problems = [r["status"] for r in row["reflections"] if r["status"] != "ok"]
    if problems:
        head += f" ({', '.join(problems)})"
    gate = row["gate"]
    if gate is None:
        return head + "; no candidate"
    verdict = "accepted" if gate["accepted"] else "rejected"
    means = f"{figure(gate['mean_a'])} -> {figure(gate['mean_b'])}"
    line = f"{head}; gate {gate['gate']}: {means}, {gate_figures(gate)}: {verdict}"
    again = row.get("refresh")
    if again:
        pooled = again["pooled"]
        line += f"; the current skill scored again: {figure(pooled['accuracy'])}"
        line += f" pooled over {pooled['n_items']} items"
    return line


def gate_figures(gate: Mapping[str, Any]) -> str:
    """A gate decision's difference, and for a paired gate its test's p at the decision's share of
    alpha, and the failed rows left out."""
    share = gate.get("step_alpha")
    if share is None:  # a history written before the shares: the decision's test and alpha as they were
        lo, hi = gate["ci95"]
        return (  # it held a two-sided interval beside the one-sided (greater) test's p
            f"diff {figure(gate['diff'])} [{figure(lo)}, {figure(hi)}] (two-sided 95% CI),"
            f" one-sided p={figure(gate['p_value'], 4)}"
        )
    failed = gate.get("failed_rows") or {}
    left_out = sum(failed.values())
    diff = gate["diff"]
    text = f"diff {'n/a' if diff is None else f'{diff:+.3f}'}"
    if gate["gate"] == "paired":
        if gate.get("bound"):  # a history written before the exact test: its interval's bound
            text += f" >= {figure(gate['bound'][0])} (one-sided {100 * (1 - share):.4g}% bound)"
        text += (
            f", one-sided p={figure(gate['p_value'], 4)} vs alpha {share:.3g}"
            f" (decision {gate['decision']}: alpha/2^{gate['decision']})"
        )
    text += f" on {gate['n_items']} items"
    if left_out:
        text += (
            f"; {left_out} failed rows left out"
            f" ({failed.get('current', 0)} current, {failed.get('candidate', 0)} candidate)"
        )
    return text
