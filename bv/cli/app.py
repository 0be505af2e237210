"""bv's command line: options are parsed here and streams wired; each stage's logic lives in its module."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

import click

from bv import __version__
from bv.cli import ending
from bv.core import environment
from bv.core.errors import BadConfig, BVError, Interrupted, MissingPackage, StdoutClosed
from bv.core.run_context import RunContext, current, running

# Every command: where it is defined, and the first sentence of its help, which is all that
# `bv --help` lists (click's short help), so that listing imports no command module. Each text
# is its command's, checked against the command's own help by tests/cli/test_cli_listing.py.
COMMANDS: Mapping[str, tuple[str, str]] = {
    "cache": ("bv.cli.cache_commands:cache", "Inspect, clear or merge reply caches."),
    "data": (
        "bv.cli.data_commands:data",
        "Get the BabyVision items: meta_data.jsonl + images/, checked (docs/data.md).",
    ),
    "eval": (
        "bv.cli.eval_command:eval_",
        "Evaluate one model: prompt, rollout, judge and report, into one run folder.",
    ),
    "export": (
        "bv.cli.data_commands:export",
        "Write judged rows for the official scorer or for spreadsheets (docs/data.md).",
    ),
    "import": (
        "bv.cli.item_commands:import_",
        "Import BabyVision results (official, lmms-eval, VLMEvalKit, inspect) and items into bv records.",
    ),
    "judge": ("bv.cli.request_commands:judge", "Extract each reply's answer and decide whether it is right."),
    "merge": (
        "bv.cli.result_commands:merge",
        "Combine runs and shards: one row per (id, run), a later file winning (files, or stdin).",
    ),
    "models": (
        "bv.cli.data_commands:models",
        "List the models an endpoint serves (its /v1/models), one per line.",
    ),
    "optimize": (
        "bv.cli.optimize_command:optimize",
        "Improve a skill: roll out train batches, have the optimizer model propose edits from the"
        " failures, keep a candidate that scores higher on the selection split, and hand back the best"
        " skill only when the untouched test split confirms it (else the seed).",
    ),
    "prompt": (
        "bv.cli.item_commands:prompt",
        "Turn items (official meta_data.jsonl or bv's own) into chat requests.",
    ),
    "report": (
        "bv.cli.result_commands:report",
        "Accuracy overall, by type and by subtype; several inputs side by side; a table of runs.",
    ),
    "rollout": (
        "bv.cli.request_commands:rollout",
        "Send prompt records to a model, concurrently, with retries and a cache.",
    ),
    "synth": (
        "bv.cli.item_commands:synth",
        "Write a deterministic BabyVision-style sample set with exact answers.",
    ),
    "templates": (
        "bv.cli.template_commands:templates",
        "List the prompt templates: name, SHA-256, where each comes from, placeholders.",
    ),
}


class LazyGroup(click.Group):
    """A click group that imports a command's module only when the command runs or shows its
    help (`bv report` loads the report's options, not the optimizer's); its listing in
    `bv --help` comes from COMMANDS' short helps, formatted as click formats a command's own."""

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, name = self.lazy[cmd_name][0].partition(":")
            self.commands[cmd_name] = getattr(importlib.import_module(module), name)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:  # "Did you mean": from every name, loaded or not
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, each command not yet loaded shown by a stand-in holding its short help."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            command = self.commands.get(name) or click.Command(name, help=self.lazy[name][1])
            if not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="bv")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Evaluate multimodal LLMs on BabyVision-style visual questions.

    Each stage reads JSONL (files, or stdin when none) and writes JSONL to stdout;
    progress and errors go to stderr.

    \b
      bv data --out data/       # the official 388 items (or a sample: bv synth --out data/)
      bv prompt data/meta_data.jsonl | bv rollout -m MODEL -j 32 | bv judge > results.jsonl
      bv report results.jsonl

    Exit status: 0 all rows succeeded, 1 some rows failed (every row still written), 2 usage
    error, 130 Ctrl-C, 143 SIGTERM (docs/exit-status.md).
    """
    from bv.cli.common import cli_words  # loaded by every command already

    run = current()
    run.stage = ctx.invoked_subcommand or ""
    command = cli.get_command(ctx, run.stage)
    run.words = lambda message: cli_words(message, command)  # the library's settings as our options


# Commands that load the HTTP stack: they leave without interpreter teardown (bv.cli.ending.leave).
_FAST_EXIT = ("rollout", "judge")


def run(args: list[str] | None = None, context: RunContext | None = None) -> int:
    """Run one bv command line in this process and return its exit status, ending nothing: no
    traceback for expected failures (BV_DEBUG=1 shows one), quiet on a closed stdout. The command
    runs in a run context of its own (bv.core.run_context: its secrets, notes and limits), whose
    second Ctrl-C or SIGTERM quits the process (bv.cli.ending.quit_soon)."""
    with running(context or RunContext(hard_stop=ending.quit_soon)):
        return _run(args)


def _run(args: list[str] | None) -> int:
    import signal

    ending.install_sigterm()
    try:
        status = cli.main(args, prog_name="bv", standalone_mode=False)
        return status if isinstance(status, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        return ending.interrupted(signal.SIGINT)
    except ending.Terminated:
        return ending.interrupted(signal.SIGTERM)
    except (StdoutClosed, BrokenPipeError):
        from bv.core.jsonl import silence_stdout

        silence_stdout()
        return 0
    except Interrupted as exc:  # a second signal, where no event loop ran (the rules judge)
        return ending.status_for(exc.signal or signal.SIGINT)
    except BadConfig as exc:  # raised by a command's own checks: worded with its options
        from bv.cli.common import cli_words

        click.UsageError(cli_words(str(exc), cli.commands.get(current().stage))).show()
        return 2
    except MissingPackage as exc:  # an optional extra the command needs, named with its pip install
        from bv.cli.common import error

        error(str(exc))
        return 2
    except Exception as exc:
        if environment.debug():
            raise
        from bv.cli.common import cli_words, error

        kind = "" if isinstance(exc, (BVError, OSError)) else f"internal error ({type(exc).__name__}): "
        message = cli_words(str(exc), cli.commands.get(current().stage))
        error(kind + message + ("" if kind == "" else " (set BV_DEBUG=1 for a traceback)"))
        return ending.ROWS_FAILED


def main() -> None:
    """The `bv` script: run the command line, then end the process with its status."""
    context = RunContext(hard_stop=ending.quit_soon)
    status = run(None, context)
    if context.stage in _FAST_EXIT:
        ending.leave(status)
    sys.exit(status)
