"""`bv cache`: inspect, clear or merge reply caches (registered on the group in bv.cli.app)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bv.cli.common import default_cache, reader_may_leave
from bv.cli.options import CACHE, Finite
from bv.core.terminal import printable

if TYPE_CHECKING:
    from bv.engine.cache import ReplyCache


@click.group()
def cache() -> None:
    """Inspect, clear or merge reply caches.

    \b
    Examples:
      bv cache stats
      bv cache list --model gpt-4o -n 5
      bv cache clear --model gpt-4o
      bv cache merge node*/cache.sqlite --cache cache.sqlite
    """


@cache.command("stats")
@CACHE
def cache_stats(cache_path: Path | None) -> None:
    """Replies cached, per backend and model, as JSON.

    \b
    Example:
      bv cache stats --cache build/cache.sqlite
    """
    import json

    from bv.engine.cache import ReplyCache

    path = cache_path or default_cache()
    stats: dict[str, object] = {"path": str(path), "replies": 0, "models": []}
    if path.exists():
        with ReplyCache(path) as opened:
            stats = opened.stats()
    with reader_may_leave():
        click.echo(json.dumps(stats, indent=2))


@cache.command("clear")
@CACHE
@click.option("--model", help="Only this model's replies.")
@click.option("--older-than", type=Finite(min=0), help="Only replies older than this many days.")
@click.option("--all", "everything", is_flag=True, help="Every reply; needed when no filter is given.")
def cache_clear(
    cache_path: Path | None, model: str | None, older_than: float | None, everything: bool
) -> None:
    """Delete cached replies (one model's, old ones, or --all).

    \b
    Examples:
      bv cache clear --model gpt-4o
      bv cache clear --older-than 30
      bv cache clear --all
    """
    from bv.engine.cache import ReplyCache

    path = cache_path or default_cache()
    cache = ReplyCache(path) if path.exists() else None
    try:
        _clear(cache, path, model, older_than, everything)
    finally:
        if cache is not None:
            cache.close()


def _clear(
    cache: ReplyCache | None, path: Path, model: str | None, older_than: float | None, everything: bool
) -> None:
    if cache is not None and model is None and older_than is None and not everything:
        replies = cache.stats()["replies"]
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise click.UsageError(
                f"this would delete all {replies} cached replies in {path}; add --all to do so,"
                " or choose some with --model or --older-than"
            )
        if not click.confirm(f"Delete all {replies} cached replies in {path}?", err=True):
            click.echo("bv cache: nothing deleted", err=True)
            return
    deleted = cache.clear(model, None if older_than is None else older_than * 86400) if cache else 0
    click.echo(f"bv cache: deleted {deleted} {'reply' if deleted == 1 else 'replies'} from {path}", err=True)
    if cache is not None and model is not None and deleted == 0 and older_than is None:
        click.echo(
            printable(f"bv cache: no replies of model {model!r}; the cache holds: {cache.holds()}"), err=True
        )


@cache.command("list")
@CACHE
@click.option("--model", help="Only this model's replies.")
@click.option(
    "-n", "--limit", type=click.IntRange(0), default=20, show_default=True, help="The newest N (0: all)."
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per reply: created, backend, model, reply."
)
def cache_list(cache_path: Path | None, model: str | None, limit: int, as_json: bool) -> None:
    """Browse stored replies, newest first: when (UTC), backend, model and the reply's start.

    \b
    Examples:
      bv cache list
      bv cache list --model gpt-4o -n 50
      bv cache list --json -n 0 | jq -r .reply.content
    """
    import json

    from bv.engine.cache import ReplyCache

    path = cache_path or default_cache()
    if not path.exists():
        click.echo(f"bv cache: no cache at {path}", err=True)
        return
    with ReplyCache(path) as cache:
        entries = cache.entries(model, limit)
        holds = cache.holds() if model is not None and not entries else ""
    with reader_may_leave():
        for entry in entries:
            if as_json:
                click.echo(json.dumps(entry, ensure_ascii=False))
                continue
            content = " ".join(str(entry["reply"].get("content") or "").split())
            start = content[:100] + ("…" if len(content) > 100 else "")
            click.echo(printable(f"{entry['created']}  {entry['backend']}  {entry['model']}  {start}"))
    if model is not None and not entries:
        click.echo(printable(f"bv cache: no replies of model {model!r}; the cache holds: {holds}"), err=True)


@cache.command("merge")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@CACHE
def cache_merge(sources: tuple[Path, ...], cache_path: Path | None) -> None:
    """Gather the replies of other caches (per node, per shard) into one (--cache, or the default).

    Each SOURCE is read only, so it may be a copy of a cache still in use (its .sqlite with the
    -wal beside it) or a cache another bv is writing. Where two hold a reply to the same request,
    the one already in the target stays (then the first SOURCE's). A file that is not a reply
    cache is refused, naming it; what the SOURCEs before it gave is kept. A missing SOURCE is
    refused before anything is merged or the target created.

    \b
    Examples:
      bv cache merge node1/cache.sqlite node2/cache.sqlite --cache cache.sqlite
      bv cache merge cache.sqlite --cache snapshot.sqlite    # a copy of a cache in use
    """
    from bv.engine.cache import ReplyCache
    from bv.engine.cache_merge import check_sources, merge_into

    path = cache_path or default_cache()
    check_sources(sources)  # a missing SOURCE is refused before the target is created
    with ReplyCache(path) as target:
        for source in sources:
            merged = merge_into(target, source)
            click.echo(printable(f"bv cache merge: {merged.line()}"), err=True)
        total = target.stats()["replies"]
    click.echo(printable(f"bv cache merge: {path} holds {total} replies"), err=True)
