"""bv rollout --dry-run: what a rollout would send and cost, and it sends nothing."""

from __future__ import annotations

from support.commands import bv_inproc
from support.fakeopenai import Reply

from bv.core.images import encode_image
from bv.stages.dryrun import image_tokens


def test_image_tokens_follow_openais_published_examples():
    assert image_tokens(1024, 1024) == 765
    assert image_tokens(2048, 4096) == 1105
    assert image_tokens(4096, 8192, "low") == 85


def test_dry_run_sends_nothing_and_counts_what_the_cache_holds(server, sample_dir, tmp_path):
    items = sample_dir / "meta_data.jsonl"
    rollout = f"bv rollout -m m --base-url {server.base_url} --repeats 2 -q"
    first = bv_inproc(f"bv prompt {items} --limit 2 | {rollout} > {tmp_path / 'r.jsonl'}")
    assert first.returncode == 0, first.stderr
    assert len(server.seen) == 4  # 2 rows × 2 repeats, now cached
    server.seen.clear()
    dry = bv_inproc(f"bv prompt {items} --limit 6 | {rollout} --dry-run")
    assert dry.returncode == 0, dry.stderr
    assert server.seen == []  # nothing sent
    assert dry.stdout == ""
    assert "rows:          6\n" in dry.stderr
    assert "requests:      12 (6 rows × 2 repeats)\n" in dry.stderr
    assert "in the cache:  4 of these requests" in dry.stderr
    assert "to send:       8\n" in dry.stderr
    images = [line.split('"image": "')[1].split('"')[0] for line in items.read_text().splitlines()[2:6]]
    expected = 2 * sum(len(encode_image(sample_dir / image)) for image in images)
    assert f"image bytes:   {expected:,} (" in dry.stderr
    tokens = next(line for line in dry.stderr.splitlines() if "prompt tokens:" in line)
    assert int(tokens.split("~")[1].split()[0]) > 8 * 85  # at least the images' base cost


def test_dry_run_follows_cached_refinement_turns(server, sample_dir, tmp_path):
    server.responder = lambda seen: Reply(
        content="I think it is A" if len(server.seen) == 1 else "\\boxed{A}"
    )
    items = sample_dir / "meta_data.jsonl"
    rollout = f"bv rollout -m m --base-url {server.base_url} --max-turns 3 -q"
    assert bv_inproc(f"bv prompt {items} --limit 1 | {rollout} > {tmp_path / 'r.jsonl'}").returncode == 0
    assert len(server.seen) == 2  # a refinement turn, then a boxed answer
    server.seen.clear()
    dry = bv_inproc(f"bv prompt {items} --limit 2 | {rollout} --dry-run")
    assert server.seen == [] and dry.returncode == 0
    assert "requests:      2 (2 rows × 1 repeat; up to 6 with --max-turns 3)" in dry.stderr
    assert "in the cache:  2 of these requests" in dry.stderr
    assert "to send:       1 (and up to 2 refinement turns)" in dry.stderr
    no_cache = bv_inproc(f"bv prompt {items} --limit 2 | {rollout} --dry-run --no-cache")
    assert "in the cache:  off (--no-cache)" in no_cache.stderr and "to send:       2 " in no_cache.stderr
    assert server.seen == []
