"""`bv export --format inspect`: judged rows as an inspect_ai eval log (`.eval`), so `inspect view`
and `inspect log` show a bv run beside the team's inspect runs.

Built with inspect_ai's own classes (`EvalLog`, `EvalSpec`, `EvalSample`, `Score`) and written by
its `write_eval_log`, so the log is what inspect reads; inspect_ai (the optional extra `inspect`)
is imported only here, when this format is asked. One sample per (id, run), epoch run+1 (inspect
counts epochs from 1); the score is `C` or `I` as inspect's `accuracy()` reads them, a row without
a verdict `I`, as `bv report` counts it. The results hold the accuracy and standard error `bv
report` prints (Avg@k over runs), not inspect's own reduction of the epochs. docs/formats.md has
the mapping; `EXPORT_MAPPING` grows when it changes what a log holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from bv import __version__
from bv.core.errors import BVError, Fatal, MissingPackage
from bv.core.images import encode_image, url_path
from bv.core.records import JudgedRow

EXPORT_MAPPING = 1
TASK = "babyvision"
SCORER = "bv_judge"
INSTALL = "pip install 'babyvision-bv[inspect]'"


def needs_inspect() -> None:
    """MissingPackage naming the extra when inspect_ai is not installed (the CLI exits 2)."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise MissingPackage(f"inspect_ai eval logs need the inspect-ai package: {INSTALL}") from None


def _image(url: str, missing: list[str]) -> str:
    """An image as inspect's ContentImage holds it: a data URL (the log carries it, as inspect's own
    logs do), or the file's path when it cannot be read here (noted in `missing`)."""
    if not url.startswith("file:"):
        return url
    path = url_path(url)
    try:
        return encode_image(path)
    except (OSError, BVError):
        missing.append(path)
        return path


def _messages(row: JudgedRow, missing: list[str]) -> list[Any]:
    """The prompt bv sent (OpenAI chat messages) as inspect's chat messages, images included: the
    system message first, as inspect's solvers put it."""
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ContentImage, ContentText

    out: list[Any] = []
    for message in row.get("messages") or []:
        content = message.get("content")
        parts: list[Any] = []
        for part in content if isinstance(content, list) else [content]:
            if isinstance(part, str):
                parts.append(ContentText(text=part))
            elif isinstance(part, dict) and part.get("type") == "text":
                parts.append(ContentText(text=str(part.get("text", ""))))
            elif isinstance(part, dict) and part.get("type") == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, dict) else None
                if isinstance(url, str):
                    parts.append(ContentImage(image=_image(url, missing)))
        kind = ChatMessageSystem if message.get("role") == "system" else ChatMessageUser
        out.append(kind(content=parts))
    return out or [ChatMessageUser(content=str(row.get("question") or ""))]


def _score(row: JudgedRow) -> Any:
    """bv's verdict as inspect's Score: `C` right, `I` wrong or without a verdict; the extracted
    answer; the judge's reply (else the rules' reason) as the explanation."""
    from inspect_ai.scorer import CORRECT, INCORRECT, Score

    hard = row.get("hard")
    return Score(
        value=CORRECT if hard == 1 else INCORRECT,
        answer=row.get("extracted"),
        explanation=row.get("judge_reply") or row.get("judge_error") or row.get("judge_reason"),
        metadata={
            "hard": hard,
            "decided_by": row.get("decided_by"),
            "undecided": row.get("undecided"),
            "judge_model": row.get("judge_model"),
            "judge_version": row.get("judge_version"),
        },
    )


def eval_sample(row: JudgedRow, missing: list[str]) -> Any:
    """One judged row as inspect's EvalSample."""
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput

    run = row.get("run", 0)
    choice = row.get("ans_type") == "choice"
    answers = [str(a) for a in row.get("answer") or []]
    prompt = _messages(row, missing)
    inputs = [m for m in prompt if m.role != "system"] or prompt  # a sample's input: the question
    response = row.get("response") or ""
    output = ModelOutput.from_content(str(row.get("model") or ""), response, error=row.get("error"))
    return EvalSample(
        id=row["id"],
        epoch=run + 1,
        input=inputs,
        choices=[c["text"] for c in row.get("choices") or []] if choice else None,
        target=answers[0] if len(answers) == 1 else answers,
        messages=[*prompt, ChatMessageAssistant(content=response)],
        output=output,
        scores={SCORER: _score(row)},
        metadata={
            "question": row.get("question"),
            "ans_type": row.get("ans_type"),
            "type": row.get("type"),
            "subtype": row.get("subtype"),
            "images": row.get("images"),
            "run": run,
            "error": row.get("error"),
            "bv_version": row.get("bv_version"),
        },
        uuid=hashlib.sha256(f"{row['id']}\0{run}\0{row.get('model')}".encode()).hexdigest()[:22],
    )


def _one(rows: list[JudgedRow], name: str) -> str:
    """The value of `name` all rows share; an eval log is one model's."""
    values = sorted({str(row.get(name) or "") for row in rows})
    if len(values) > 1:
        shown = ", ".join(values[:5])
        raise Fatal(
            f"rows of {len(values)} {name}s ({shown}): an inspect eval log holds one; export each apart"
        )
    return values[0] if values else ""


def eval_log(rows: list[JudgedRow], accuracy: float | None, stderr: float | None, missing: list[str]) -> Any:
    """The eval log of one model's judged rows; `accuracy`, `stderr`: the figures bv reports."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )

    model = _one(rows, "model")
    started = sorted(str(row.get("started_at")) for row in rows if row.get("started_at"))
    skills = sorted({(s["name"], s["sha256"]) for row in rows if (s := row.get("skill"))})
    ids = sorted({row["id"] for row in rows})
    run_id = hashlib.sha256(f"{model}\0{started[:1]}\0{len(rows)}".encode()).hexdigest()[:22]
    spec = EvalSpec(
        eval_id=run_id,
        run_id=run_id,
        task_id=run_id,
        created=_utc(started[0]) if started else _now(),
        task=TASK,
        task_version=EXPORT_MAPPING,
        task_args={"skill": ", ".join(f"{n} {sha[:12]}" for n, sha in skills) or "no skill"},
        dataset=EvalDataset(name=TASK, samples=len(ids), sample_ids=ids),
        model=model,
        config=EvalConfig(epochs=1 + max(row.get("run", 0) for row in rows)),
        packages={"babyvision-bv": __version__},
        metadata={
            "exported_by": f"bv {__version__}",
            "mapping": EXPORT_MAPPING,
            "skills": [{"name": n, "sha256": sha} for n, sha in skills],
            "bv_versions": sorted({str(row.get("bv_version")) for row in rows if row.get("bv_version")}),
            "judge_versions": sorted(
                {str(row.get("judge_version")) for row in rows if row.get("judge_version")}
            ),
            "endpoints": sorted({str(row.get("endpoint")) for row in rows if row.get("endpoint")}),
        },
    )
    metrics = {"accuracy": EvalMetric(name="accuracy", value=accuracy if accuracy is not None else 0.0)}
    if stderr is not None:
        metrics["stderr"] = EvalMetric(name="stderr", value=stderr)
    samples = [eval_sample(row, missing) for row in rows]
    results = EvalResults(
        total_samples=len(samples),
        completed_samples=len(samples),
        scores=[EvalScore(name=SCORER, scorer=SCORER, scored_samples=len(samples), metrics=metrics)],
    )
    return EvalLog(
        status="success",
        eval=spec,
        plan=EvalPlan(steps=[EvalPlanStep(solver="bv rollout"), EvalPlanStep(solver="bv judge")]),
        results=results,
        stats=EvalStats(started_at=spec.created, completed_at=_utc(started[-1]) if started else spec.created),
        samples=samples,
    )


def _utc(text: str) -> str:
    """A row's `started_at` (`...Z`) as inspect's UTC time (`+00:00`)."""
    return text[:-1] + "+00:00" if text.endswith("Z") else text


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


def write_inspect(rows: Iterable[JudgedRow], out: Path) -> tuple[int, list[str]]:
    """Write the rows' eval log to `out` (a `.eval` file) whole or not at all, with the accuracy
    and standard error `bv report` prints for them. Returns the samples written and the images
    that could not be read (their paths are in the log instead)."""
    import tempfile

    from inspect_ai.log import write_eval_log

    from bv.core.atomic import atomic_output
    from bv.reporting.report import summarize

    listed = list(rows)  # an eval log is one object: its samples are held to be written
    overall = summarize(cast(list[dict[str, Any]], listed))["overall"]
    missing: list[str] = []
    log = eval_log(listed, overall["accuracy"], overall["se"], missing)

    with tempfile.TemporaryDirectory(prefix="bv-inspect-") as folder:
        staged = Path(folder) / "log.eval"
        try:
            write_eval_log(log, str(staged), format="eval")
        except OSError as exc:
            raise Fatal(f"cannot write {out}: {exc.strerror or exc}") from None
        with atomic_output(out, binary=True) as stream, open(staged, "rb") as written:
            while block := written.read(1 << 20):
                stream.write(block)
    return len(listed), missing
