"""The cost limit's stop message says what the run spent when it ended, as typed (issue 34: it
froze the spend at the moment the limit was reached, '$0.0022 spent' when the rows cost
$0.0715, the replies in flight paid for after it). Costs worked out here from the rates."""

from __future__ import annotations

import itertools
import json
import re
import threading

from support.commands import bv_inproc, jsonl
from support.fakeopenai import Reply

from bv.core.stats import dollars

RATES = {"m": {"input": 1.0, "output": 2.0}}
FIRST = (10 * 1.0 + 5 * 2.0) / 1e6  # $0.00002
REPLY = (500 * 1.0 + 20000 * 2.0) / 1e6  # $0.0405, where ~$0.0006 was reserved for it


def test_the_stop_message_counts_the_replies_that_were_in_flight(sample_dir, server, tmp_path):
    """-j 8 and no token limit, so what is reserved for a request is its prompt's estimate alone
    and its long reply costs more. After the first request (sent alone), eight go at once, each
    answered later than the one before; the first of them reaches the limit while seven are in
    flight, which are paid for and their rows written, and the summary's spend is theirs too."""
    order, lock = itertools.count(), threading.Lock()

    def staggered(seen):
        with lock:
            n = next(order)
        return Reply(usage=(10, 5) if n == 0 else (500, 20000), delay=0.05 + 0.1 * n)

    server.responder = staggered
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(RATES))
    prompts = tmp_path / "prompts.jsonl"
    assert bv_inproc(f"bv prompt {sample_dir / 'meta_data.jsonl'} > {prompts}").returncode == 0
    result = bv_inproc(
        f"bv rollout -m m --base-url {server.base_url} --api-key sk-x --no-cache -j 8"
        f" --prices {prices} --max-cost 0.01 {prompts}"
    )
    assert result.returncode == 130, result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == len(server.finished()) == 9, result.stderr  # those in flight were written
    spent = sum(row["cost_usd"] for row in rows)
    assert round(spent, 8) == round(FIRST + 8 * REPLY, 8)
    said = re.findall(r"stopped at the cost limit \((\S+) spent of \$0.01\)", result.stderr)
    assert said[0] == dollars(FIRST + REPLY)  # as it was reached
    assert said[-1] == dollars(spent), result.stderr  # the summary: every reply paid for
