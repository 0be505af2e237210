"""`bv cache stats` shows dates; `bv cache clear` deletes everything only when asked to."""

from __future__ import annotations

import json
import re

from support.commands import BIN, bv_inproc
from support.fakeopenai import Reply
from support.terminal import on_terminal


def _filled_cache(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="\\boxed{A}")
    cache = tmp_path / "cache.sqlite"
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m"
        f" --cache {cache} -q > /dev/null"
    )
    assert result.returncode == 0, result.stderr
    return cache


def test_stats_show_dates(sample_dir, server, tmp_path):
    cache = _filled_cache(sample_dir, server, tmp_path)
    stats = json.loads(bv_inproc(f"bv cache stats --cache {cache}").stdout)
    model = stats["models"][0]
    for key in ("first", "last"):
        assert re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ", model[key]), model


def test_clear_without_a_filter_needs_all(sample_dir, server, tmp_path):
    cache = _filled_cache(sample_dir, server, tmp_path)
    refused = bv_inproc(f"bv cache clear --cache {cache} < /dev/null")
    assert refused.returncode == 2 and "--all" in refused.stderr and "all 12 cached replies" in refused.stderr
    assert json.loads(bv_inproc(f"bv cache stats --cache {cache}").stdout)["replies"] == 12
    one = bv_inproc(f"bv cache clear --cache {cache} --model other")
    assert one.returncode == 0 and "deleted 0 replies" in one.stderr
    done = bv_inproc(f"bv cache clear --cache {cache} --all")
    assert done.returncode == 0 and "deleted 12 replies" in done.stderr
    assert json.loads(bv_inproc(f"bv cache stats --cache {cache}").stdout)["replies"] == 0


def test_clear_asks_on_a_terminal(sample_dir, server, tmp_path):
    cache = _filled_cache(sample_dir, server, tmp_path)
    status, shown, _ = on_terminal([BIN / "bv", "cache", "clear", "--cache", cache], input_bytes=b"n\n")
    assert status == 0 and "Delete all 12 cached replies" in shown and "nothing deleted" in shown, shown
    assert json.loads(bv_inproc(f"bv cache stats --cache {cache}").stdout)["replies"] == 12
    status, shown, _ = on_terminal([BIN / "bv", "cache", "clear", "--cache", cache], input_bytes=b"y\n")
    assert status == 0 and "deleted 12 replies" in shown, shown
    assert json.loads(bv_inproc(f"bv cache stats --cache {cache}").stdout)["replies"] == 0
