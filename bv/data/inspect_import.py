"""`bv import` of inspect_ai eval logs (`.eval`, or a `.json` log) of BabyVision-style tasks.

Read by inspect_ai's own `read_eval_log` (the optional extra `inspect`, imported only when a log is
given). Each sample (one per id and epoch) becomes a judged bv row with inspect's verdict kept:
epoch K is run K-1, the score's value the verdict (`C`, `1`, true right; `I`, `N`, `0`, false
wrong, as inspect's `accuracy()` counts them), its answer the extracted answer, its explanation
the judge's reply, the target the gold answer and the sample's choices its options (labelled A,
B, C… as inspect's `multiple_choice` labels them). A sample that cannot be mapped (it failed, it
has no score, its score is partial or not one verdict, several scorers and none chosen with
`scorer`) costs that sample alone, named. docs/formats.md lists the mapping.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bv.core.errors import BadRecord, Fatal, MissingPackage
from bv.core.jsonl import JsonlWriter, Problems
from bv.core.records import Item
from bv.data.foreign import shown
from bv.data.imported import MAPPING_VERSION, base_item, judged_row

FORMAT = "inspect_ai eval log"
INSTALL = "pip install 'babyvision-bv[inspect]'"
# A `.json` eval log begins with its format version and status (inspect's EvalLog field order).
_JSON_LOG = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')


def is_log(path: Path) -> bool:
    """An inspect eval log: a `.eval` file, or a `.json` file that begins as inspect's json logs do."""
    suffix = path.suffix.lower()
    if suffix == ".eval":
        return True
    if suffix != ".json" or str(path) == "-":
        return False
    try:
        with open(path, "rb") as f:
            return _JSON_LOG.match(f.read(256)) is not None
    except OSError:
        return False


def verdict(value: Any) -> int:
    """A score value as bv's verdict (1 right, 0 wrong); BadRecord for a partial or other value."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value in ("C", "I", "N"):  # inspect's CORRECT, INCORRECT, NOANSWER
        return int(value == "C")
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    raise BadRecord(f"score value {value!r} is not one verdict (C, I, N, 1, 0, true or false)")


def _score(sample: Any, scorer: str | None) -> tuple[str, Any]:
    """The sample's one score (name, Score), or the one named by `scorer`."""
    scores = sample.scores or {}
    if not scores:
        raise BadRecord("no score: inspect did not score this sample")
    if scorer is not None:
        if scorer not in scores:
            raise BadRecord(f"no score of scorer {scorer!r} (its scorers: {', '.join(sorted(scores))})")
        return scorer, scores[scorer]
    if len(scores) > 1:
        raise BadRecord(
            f"scores of {len(scores)} scorers ({', '.join(sorted(scores))}): choose one with `scorer`"
        )
    return next(iter(scores.items()))


def _text(message_content: Any) -> str:
    """The text of a message's content (a string, or content parts)."""
    if isinstance(message_content, str):
        return message_content
    return "\n".join(part.text for part in message_content if getattr(part, "type", None) == "text")


def _question(sample: Any) -> str:
    """The question: the sample's `question` metadata (bv's export writes it), else its input's text."""
    question = (sample.metadata or {}).get("question")
    if isinstance(question, str):
        return question
    if isinstance(sample.input, str):
        return sample.input
    return "\n".join(_text(m.content) for m in sample.input if m.role == "user")


def _meta(sample: Any, name: str) -> str:
    value = (sample.metadata or {}).get(name)
    return value if isinstance(value, str) else ""


def sample_row(sample: Any, model: str | None, scorer: str | None, task: str) -> dict[str, Any]:
    """One inspect sample as a judged bv row, its score's verdict kept as `hard`. A sample that
    failed in inspect (its `error`) is a row whose rollout failed: wrong, and counted in the
    errors column, where inspect's accuracy leaves it out."""
    failed = sample.error is not None
    name, score = (scorer or "", None) if failed else _score(sample, scorer)
    hard = 0 if score is None else verdict(score.value)
    targets = [sample.target] if isinstance(sample.target, str) else list(sample.target)
    if not targets:
        raise BadRecord("the target is empty")
    options = [str(c) for c in sample.choices or []]
    if options and len(targets) != 1:
        raise BadRecord(f"a choice sample with {len(targets)} targets; bv's choice items have one label")
    base = base_item(
        sample.id,
        "id",
        targets[0],
        "choice" if options else "blank",
        options,
        _meta(sample, "type"),
        _meta(sample, "subtype"),
    )
    base["answer"] = targets
    answer = score.answer if score is not None and isinstance(score.answer, str) else None
    explanation = score.explanation if score is not None and isinstance(score.explanation, str) else None
    row = judged_row(
        base,
        question=_question(sample),
        run=sample.epoch - 1,
        model=model,
        response=sample.output.completion if sample.output is not None else "",
        extracted=answer,
        hard=hard,
        reason="not judged: the sample failed in inspect_ai" if failed else f"inspect_ai's {name} score",
        judge_version=f"inspect:{task}/{name or 'none'}",
        judge_reply=explanation,
    )
    if failed:
        message = str(getattr(sample.error, "message", sample.error))
        row["error"] = f"inspect_ai: {message[:500]}"
        row["decided_by"] = "rollout_error"
    row["imported"] = {
        "format": FORMAT,
        "mapping": MAPPING_VERSION,
        "task": task,
        "sample_id": sample.id,
        "epoch": sample.epoch,
        "scorer": name or None,
        "value": None if score is None else score.value,
    }
    return row


def read_log(path: Path) -> Any:
    """The eval log at `path`, read by inspect_ai; BadRecord when it is not one inspect can read."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise MissingPackage(
            f"reading inspect_ai eval logs needs the inspect-ai package: {INSTALL}"
        ) from None
    try:
        return read_eval_log(str(path))
    except Exception as exc:  # inspect's reader raises what its zip, JSON and pydantic readers raise
        raise BadRecord(
            f"not an eval log inspect_ai can read ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None


def write_log(
    path: Path,
    writer: Any,
    problems: Problems,
    model: str | None,
    items: Mapping[str, Item],
    scorer: str | None = None,
) -> None:
    """Write the judged rows of an inspect eval log's samples; a sample that cannot be mapped costs
    itself. `items` (from `--items`) gives each row its item's images, by id."""
    try:
        log = read_log(path)
    except BadRecord as exc:
        problems.report(shown(path), str(exc))
        return
    if not log.samples:
        problems.report(shown(path), f"an eval log without samples (status {log.status}): nothing to import")
        return
    scorers = [s.name for s in log.eval.scorers or []]
    for sample in log.samples:
        # a failed sample has no score to name its scorer: the log's one scorer (or `scorer`) does
        chosen = scorer or (scorers[0] if sample.error is not None and len(scorers) == 1 else None)
        try:
            row = sample_row(sample, model or log.eval.model, chosen, log.eval.task)
        except BadRecord as exc:
            problems.report(f"{shown(path)}: sample {sample.id} epoch {sample.epoch}", str(exc))
            continue
        if row["id"] in items:
            row["images"] = items[row["id"]]["images"]
        writer.write(row)


def logs_as_results(specs: tuple[str, ...], folder: Path, problems: Problems) -> tuple[str, ...]:
    """`bv report`'s inputs with each inspect eval log (PATH or NAME=PATH) imported into a results
    file in `folder`, named as the log was (its stem, or NAME); other inputs are left as given."""
    out: list[str] = []
    for n, spec in enumerate(specs):
        name, sep, path = spec.partition("=")
        if not (sep and name) or Path(spec).exists():
            name, path = Path(spec).stem, spec
        if path == "-" or not Path(path).is_file() or not is_log(Path(path)):
            out.append(spec)
            continue
        results = folder / f"{n}.jsonl"
        with open(results, "w", encoding="utf-8") as stream:
            write_log(Path(path), JsonlWriter(stream), problems, None, {})
        if results.stat().st_size == 0:  # named here: the file read is ours, the log is the user's
            problems.finish()
            raise Fatal(
                f"{path}: no sample of this eval log could be read as a judged row; nothing to report"
            )
        out.append(f"{name}={results}")
    return tuple(out)
