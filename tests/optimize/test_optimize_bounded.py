"""bv optimize's records stay bounded however much its optimizer writes (issue 34: 2 MB of
optimizer replies made a 59 MB history row; three steps a 311 MB history and 270 MB reports,
all read again on every resume). As typed, against the loopback server."""

from __future__ import annotations

import json
import tracemalloc

from support.commands import bv_inproc
from support.fakeopenai import Reply

from bv.optimize.edits import MAX_EDITS_READ, MAX_RECORDED, MAX_REPLY_CHARS
from bv.optimize.rundir import RunFolder

EXTRA = 1500  # operations past the first MAX_EDITS_READ of each reply


def _reply() -> str:
    """One optimizer reply just under MAX_REPLY_CHARS: 64 operations of ~3 KB each that cannot
    apply (their target is nowhere), then EXTRA more that are never read."""
    read = [
        {"op": "replace", "target": f"nowhere {n}", "content": "x" * 3000, "reason": "r" * 100}
        for n in range(MAX_EDITS_READ)
    ]
    unread = [{"op": "append", "content": "- y"}] * EXTRA
    text = json.dumps({"edits": read + unread})
    assert MAX_REPLY_CHARS * 0.9 < len(text) < MAX_REPLY_CHARS
    return text


def test_two_megabytes_of_optimizer_replies_make_a_small_history_and_report(tmp_path, server):
    from bv.data.synth import write_sample_set

    reply = _reply()

    def respond(seen):
        model = seen.body.get("model")
        if model == "writer":
            return Reply(content=reply)
        if model == "judge-m":
            return Reply(content="False")
        return Reply(content="\\boxed{Z}")  # every train row a failure: every minibatch is reflected on

    server.responder = respond
    write_sample_set(tmp_path / "data", 48, seed=3)
    (tmp_path / "seed.md").write_text("## Looking\n\n- Look at the whole picture.\n")
    out = tmp_path / "run"
    done = bv_inproc(
        f"bv optimize {tmp_path / 'data' / 'meta_data.jsonl'} --skill {tmp_path / 'seed.md'} --out {out}"
        f" -m target --base-url {server.base_url} --api-key sk-test-target-0123456789"
        f" --optimizer-model writer --optimizer-base-url {server.base_url} --judge-model judge-m"
        f" --judge-base-url {server.base_url} --ratio 2:1:1 --batch-size 16 --minibatch 2 --edits 8"
        f" --repeats 1 --steps 1 --retries 0 --cache {tmp_path / 'cache.sqlite'}"
    )
    assert done.returncode == 0, done.stderr
    replies = [s for s in server.seen if s.body.get("model") == "writer"]
    assert len(replies) == 8  # 8 minibatches: 2 MB of replies in the step
    row = json.loads((out / "history.jsonl").read_text().splitlines()[1])
    assert row["proposed"] == 8 * (MAX_EDITS_READ + EXTRA)  # every operation counted
    # recorded one by one up to the bound, and each reply's one over_limit entry; the rest tallied
    assert len(row["edits"]) == MAX_RECORDED + 8
    # the first reply's 64 one by one; the other replies' (the same 64 again) tallied
    assert row["edits_not_recorded"] == {"duplicate": 7 * MAX_EDITS_READ}
    over = [e for e in row["edits"] if e["status"] == "over_limit"]
    assert [e["count"] for e in over] == [EXTRA] * 8  # one entry for a reply's unread operations
    assert all(len(e.get("content", "")) <= 2001 for e in row["edits"])
    size = (out / "history.jsonl").stat().st_size
    assert size < 400_000, size  # ~146 KB; megabytes before: 12,512 entries, each unread one its own
    report = (out / "report.md").read_text()
    assert len(report) < 400_000, len(report)
    assert report.count(f"{EXTRA} operations beyond the first") == 8 and "not recorded one by one" in report
    assert (out / "report.html").stat().st_size < 800_000
    tracemalloc.start()  # what a resume reads: the history, its rows
    try:
        RunFolder(out).history()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak


def test_no_history_row_is_written_over_the_line_limit_the_reader_holds(tmp_path, monkeypatch):
    import pytest

    from bv.core.errors import BadRecord, Fatal
    from bv.optimize import rundir

    monkeypatch.setattr(rundir, "MAX_HISTORY_LINE", 1000)
    folder = RunFolder(tmp_path)
    folder.append_history({"step": 0, "kind": "seed"})
    with pytest.raises(Fatal, match=r"the row of step 1 is \d+ bytes, over the 0 MiB"):
        folder.append_history({"step": 1, "kind": "step", "edits": ["x" * 2000]})
    assert [row["step"] for row in folder.history()] == [0]  # nothing written: still readable
    with open(folder.history_path, "a") as f:  # a row someone else wrote over it
        f.write(json.dumps({"step": 1, "edits": ["x" * 2000]}) + "\n")
    with pytest.raises(BadRecord, match=r"history.jsonl:2: a history row over"):
        folder.history()
