"""`bv eval --dry-run`: what the run would send and cost, both stages, sending nothing and
writing nothing (no key needed, no run folder made).

The rollout's figures are `bv rollout --dry-run`'s over the prompt records the run would make;
the judge's count every row that may reach the LLM judge, its prompts estimated from the items
(bv.stages.judge_plan.plan_judge_ahead); each with its cost range when `prices` are given.
"""

from __future__ import annotations

from bv.evaluation.config import EvalConfig
from bv.evaluation.evaluate import plan, prompt_records


def dry_run_eval(config: EvalConfig) -> list[str]:
    """The dry run's report, line by line: the rollout's block, then the judge's."""
    from bv.stages.judge_plan import dry_run_judge
    from bv.stages.rollout import dry_run_rollout

    checked = plan(config, dry_run=True)
    prompts, _ = prompt_records(config, checked)
    rollout = dry_run_rollout(prompts, checked.rollout)
    judge = dry_run_judge(prompts, checked.judge, ahead=config.repeats)
    return ["rollout:", *(f"  {line}" for line in rollout), "judge:", *(f"  {line}" for line in judge)]
