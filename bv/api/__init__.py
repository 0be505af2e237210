"""bv as a library: the stages as Python functions over iterables of records (docs/api.md).

    from bv import api
    prompts = list(api.prompt(items, skill="skills/v2.md"))
    rows = api.judge(api.rollout(prompts, model="gpt-4o", repeats=3), mode="rules")
    print(api.report({"v2": rows}).accuracy["v2"])

Each function is what its command does, minus the files: `api.rollout` runs the same engine as
`bv rollout` (concurrency, retries, the reply cache, and so resume: calling it again with the same
arguments sends only what did not finish). Rows come back in input order; a row whose requests
failed is returned with `error` set, as the command writes it. What stops a whole run raises a
bv.core.errors.BVError: Fatal (an unusable endpoint), BadConfig (settings that cannot work),
BadRecord (a bad input record, named by its index), and Interrupted after a Ctrl-C or SIGTERM once
the requests in flight have finished and been cached. No call ends the process, and each runs in
a run context of its own (bv.core.run_context): its secrets, notes and limits are its own, so
calls on several threads do not see each other's.

Inside a running event loop (a Jupyter cell, an async harness) `asyncio.run` cannot be nested, so
every function that runs a stage runs it there on a thread of its own with its own loop, the
caller waiting: the same call works in a notebook as in a script. Async code that must not block
awaits `api.arollout`, `api.ajudge`, `api.aevaluate` or `api.aoptimize` instead. Cancelling the
awaiting task (`task.cancel()`, a timeout of `asyncio.wait_for`) stops the run as Ctrl-C stops
the command: nothing new is sent, the requests in flight finish (within the grace
period, 10 s) and are cached, then the await raises CancelledError, the thread gone; calling again
resumes from the cache.

The functions live by what they are: bv/api/stages.py the stages over records (prompt, rollout,
judge, merge, report; runs, the table across run folders), bv/api/workflows.py the whole runs
into a folder (evaluate, optimize); this module is the one name to import them by.
"""

from bv.api.stages import _judge_config as _judge_config  # the configs the functions build
from bv.api.stages import _rollout_config as _rollout_config  # (tests/api/test_two_faces.py)
from bv.api.stages import (
    ajudge,
    arollout,
    judge,
    merge,
    prompt,
    report,
    rollout,
    runs,
)
from bv.api.workflows import aevaluate, aoptimize, evaluate, optimize, plan_optimize
from bv.reporting.report_view import Report
from bv.reporting.runs_view import RunsTable
from bv.stages.request_settings import DEFAULT_CACHE

__all__ = [
    "DEFAULT_CACHE",
    "Report",
    "RunsTable",
    "aevaluate",
    "ajudge",
    "aoptimize",
    "arollout",
    "evaluate",
    "judge",
    "merge",
    "optimize",
    "plan_optimize",
    "prompt",
    "report",
    "rollout",
    "runs",
]
