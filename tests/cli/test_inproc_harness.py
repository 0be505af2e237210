"""bv_inproc is only as honest as it is faithful: the same command lines run in process and as
real processes give the same exit status, stdout and stderr (timings aside)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.commands import bv_inproc, sh
from support.fakeopenai import Reply

# What differs from one run to the next: durations, rates, timestamps, latencies.
VARIES = re.compile(r"\d+\.\d+ s\b|[\d.]+ req/s|\"latency_s\":[\d.e-]+|\d\d:\d\d:\d\dZ|\"created\":[\d.]+")


def same(command: str) -> None:
    """Run `command` both ways: status, stdout, stderr and the file it writes (`> file`) agree."""
    target = command.rpartition("> ")[2] if "> " in command else None

    def seen(result) -> tuple:
        written = Path(target).read_text() if target else ""
        return tuple(VARIES.sub("#", text) for text in (result.stdout, result.stderr, written))

    ran = bv_inproc(command)
    in_process = (ran.returncode, *seen(ran))
    real = sh(command)
    assert in_process == (real.returncode, *seen(real)), command


@pytest.mark.parametrize(
    "command",
    [
        "bv judge --mode nope",  # a usage error: click's message and status 2, named `bv`
        "bv rollout --backend chance {items}",  # items are not prompt records: named, capped, exit 1
        "bv prompt {items} | bv rollout --backend chance --repeats 2 | bv judge --mode rules",
        "bv report {items}",  # not judged rows: an error naming the file
    ],
)
def test_in_process_and_real_processes_agree(command, sample_dir):
    same(command.format(items=sample_dir / "meta_data.jsonl"))


def test_they_agree_on_a_run_against_the_server(sample_dir, server, tmp_path):
    # Every 4th request refused: the same rows fail in each run of 12 requests.
    server.responder = lambda seen: Reply(status=503) if len(server.seen) % 4 == 0 else Reply()
    items = sample_dir / "meta_data.jsonl"
    same(f"bv prompt {items} > {tmp_path}/p.jsonl")
    same(f"bv rollout --base-url {server.base_url} -m m -j 1 --retries 0 --no-cache {tmp_path}/p.jsonl")
    same(f"bv rollout --backend chance {tmp_path}/p.jsonl | bv judge --mode rules > {tmp_path}/r.jsonl")
    same(f"bv report --format json {tmp_path}/r.jsonl")
