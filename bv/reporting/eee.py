"""`bv export --format eee`: judged rows as Every Eval Ever (github.com/evaleval/every_eval_ever)
records, schema 0.3.0: per protocol variant (bv.reporting.protocol_variant) one aggregate
`<uuid>.json` and its instance-level `<uuid>_samples.jsonl`, one line per (id, run), in EEE's
datastore layout `data/babyvision/<developer>/<model>/`.

The aggregate holds what `bv report` prints: the accuracy over all rows (a row without a verdict,
a failed rollout and an undecided row count wrong, and are counted in the details), overall and
per type and subtype, with the 95% interval over items (repeats of one item averaged first:
bv.core.stats). Fields EEE has and bv cannot fill are left out; bv's figures EEE has no field
for go in its `additional_details` and `details` slots (strings, as EEE requires). The mapping
is in docs/formats.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import uuid
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import orjson

from bv.core.items import BENCHMARK_REPO
from bv.core.records import JudgedRow
from bv.reporting.export_folder import replace_folder
from bv.reporting.protocol_variant import Measured, by_variant, variant_notes
from bv.reporting.report_types import Figures, Summary

SCHEMA_VERSION = "0.3.0"  # the EEE schema these records follow (tests/fixtures/eee/)
COLLECTION = "babyvision"
OWNED = "data"  # what the export folder holds: EEE's datastore root
GENERATION_ARGS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def write_eee(rows: Iterable[JudgedRow], out_dir: Path) -> list[tuple[Path, int]]:
    """Write the records into `out_dir` as one new folder (bv.reporting.export_folder): each
    variant's instance lines are spooled to a file in the staging folder as they come, and the
    aggregates written once every row is counted. Returns each aggregate file and its rows."""
    written = replace_folder(out_dir, OWNED, lambda staged: _write(rows, staged))
    return [(out_dir / path.relative_to(path.parents[4]), count) for path, count in written]


def _write(rows: Iterable[JudgedRow], staged: Path) -> list[tuple[Path, int]]:
    spools: dict[str, tuple[Measured, IO[bytes], Path]] = {}
    try:
        for measured, row in by_variant(rows):
            held = spools.get(measured.variant.key)
            if held is None:
                path = staged / f".{measured.variant.digest}.spool"
                held = spools[measured.variant.key] = (measured, open(path, "xb", buffering=1 << 16), path)
            held[1].write(orjson.dumps(instance_body(row, measured.variant.model)) + b"\n")
        for _, spool, _ in spools.values():
            spool.close()
        return [_finish(measured, path, staged) for measured, _, path in spools.values()]
    finally:
        for _, spool, path in spools.values():
            spool.close()
            path.unlink(missing_ok=True)


def _finish(measured: Measured, spool: Path, staged: Path) -> tuple[Path, int]:
    """One variant's samples file (each spooled line with the record's identity put first) and
    its aggregate, which names that file with its SHA-256 and line count."""
    variant = measured.variant
    summary = measured.tally.summary(variant.model)
    when = summary["provenance"]["started_at"]
    started = when["first"] if when else None
    evaluation_id = f"{COLLECTION}/{variant.model}/{variant.digest}"
    if started:
        evaluation_id += f"/{_epoch(started)}"
    file_uuid = str(uuid.UUID(bytes=hashlib.sha256(evaluation_id.encode()).digest()[:16], version=4))
    developer, model = _components(variant.model)
    relative = f"{OWNED}/{COLLECTION}/{developer}/{model}"
    folder = staged / relative
    folder.mkdir(parents=True, exist_ok=True)
    head = orjson.dumps({"schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id})[:-1] + b","
    digest, lines = hashlib.sha256(), 0
    samples = folder / f"{file_uuid}_samples.jsonl"
    with open(spool, "rb") as source, open(samples, "xb", buffering=1 << 16) as out:
        for line in source:
            data = head + line[1:]
            out.write(data)
            digest.update(data)
            lines += 1
    aggregate = _aggregate(measured, summary, evaluation_id, started)
    aggregate["detailed_evaluation_results"] = {
        "format": "jsonl",
        "file_path": f"{relative}/{samples.name}",
        "hash_algorithm": "sha256",
        "checksum": digest.hexdigest(),
        "total_rows": lines,
    }
    text = json.dumps(aggregate, indent=2, ensure_ascii=False, allow_nan=False)
    (folder / f"{file_uuid}.json").write_text(text + "\n", encoding="utf-8")
    return folder / f"{file_uuid}.json", lines


def _components(model: str) -> tuple[str, str]:
    """EEE's `<developer>/<model>` folders: the model id's prefix as the developer (EEE's rule),
    `unknown` where the id has none; each made a portable name (a model name is not trusted)."""
    developer, _, name = model.partition("/") if "/" in model else ("unknown", "", model)
    return _portable(developer), _portable(name.replace("/", "_"))


def _portable(text: str) -> str:
    name = _UNSAFE.sub("_", text).strip("._") or "_"
    return f"_{name}" if name.lower() == OWNED else name


def _epoch(stamp: str) -> str:
    """An ISO time as Unix seconds (EEE's timestamps), or the text as it is."""
    try:
        return str(int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()))
    except ValueError:
        return stamp


def _aggregate(
    measured: Measured, summary: Summary, evaluation_id: str, started: str | None
) -> dict[str, Any]:
    variant = measured.variant
    provenance = summary["provenance"]
    notes = variant_notes(variant, summary)
    results = [_result(COLLECTION, summary["overall"], summary, notes)]
    for level, group in (("type", summary["by_type"]), ("subtype", summary["by_subtype"])):
        for label, figures in group.items():
            results.append(_result(f"{COLLECTION}/{level}/{label}", figures, summary, notes))
    record: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id}
    if started:
        record["evaluation_timestamp"] = started
    record["retrieved_timestamp"] = str(int(time.time()))
    record["source_metadata"] = {
        "source_name": "bv",
        "source_type": "evaluation_run",
        "source_organization_name": "unknown",
        "evaluator_relationship": "other",
    }
    backends = ", ".join(provenance["backends"])
    record["model_info"] = {
        "name": variant.model,
        "id": variant.model,
        "additional_details": {
            "deployment_type": "unknown",
            "model_availability": "unknown",
            **({"bv_backend": backends} if backends else {}),
        },
    }
    versions = provenance["bv_versions"]
    record["eval_library"] = {
        "name": "bv",
        "version": versions[0] if len(versions) == 1 else ", ".join(versions) or "unknown",
        "additional_details": {k: v for k, v in notes.items() if k in _LIBRARY_NOTES},
    }
    record["evaluation_results"] = [result for result in results if result is not None]
    return record


_LIBRARY_NOTES = ("style", "skill", "skill_sha256", "templates", "judge_version", "judge_models")


def _result(name: str, figures: Figures, summary: Summary, notes: dict[str, str]) -> dict[str, Any] | None:
    """One EEE evaluation result: the accuracy of a group of items with bv's interval."""
    accuracy = figures["accuracy"]
    if accuracy is None or not math.isfinite(accuracy):
        return None
    details = {
        "items": str(figures["n"]),
        "rows": str(figures["rows"]),
        "runs": str(figures["runs"]),
        "correct": str(figures["correct"]),
        "rollout_errors": str(figures["errors"]),
        "judge_errors": str(figures["judge_errors"]),
        "undecided": str(figures["undecided"]),
        "failed_rows": "counted wrong (rollout errors, judge errors, undecided rows)",
        "accuracy": "Avg@k: the share of right rows over all rows",
    }
    if figures["std"] is not None:
        details["run_std"] = repr(figures["std"])
    if figures["item_accuracy"] is not None:
        details["item_accuracy"] = repr(figures["item_accuracy"])
    uncertainty: dict[str, Any] = {"num_samples": figures["n"]}
    se = figures["se"]
    if se is not None and math.isfinite(se):
        uncertainty["standard_error"] = {"value": se, "method": "standard error over items"}
    ci = figures["ci95"]
    if ci is not None and all(math.isfinite(end) for end in ci):
        uncertainty["confidence_interval"] = {
            "lower": ci[0],
            "upper": ci[1],
            "confidence_level": 0.95,
            "method": summary["interval"],
        }
    return {
        "evaluation_result_id": name,
        "evaluation_name": name,
        "source_data": {
            "dataset_name": COLLECTION,
            "source_type": "hf_dataset",
            "hf_repo": BENCHMARK_REPO,
            "samples_number": figures["n"],
        },
        "metric_config": {
            "evaluation_description": "BabyVision accuracy, judged by bv judge",
            "metric_id": "accuracy",
            "metric_name": "Accuracy",
            "metric_kind": "accuracy",
            "metric_unit": "proportion",
            "lower_is_better": False,
            "score_type": "continuous",
            "min_score": 0,
            "max_score": 1,
        },
        "score_details": {"score": accuracy, "details": details, "uncertainty": uncertainty},
        "generation_config": _generation(notes),
    }


def _generation(notes: dict[str, str]) -> dict[str, Any]:
    """EEE's typed generation arguments where bv's `params` name them; all of `params` (and the
    number of runs) as strings beside them."""
    params = json.loads(notes.get("params", "{}"))
    args: dict[str, Any] = {}
    for ours, theirs in GENERATION_ARGS.items():
        value = params.get(ours)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            args[theirs] = value
    tokens = params.get("max_tokens", params.get("max_completion_tokens"))
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 1:
        args["max_tokens"] = tokens
    details = {k: notes[k] for k in ("params", "runs") if k in notes}
    return {"generation_args": args, "additional_details": details}


def instance_body(row: JudgedRow, model: str) -> dict[str, Any]:
    """One row as an EEE instance record, but for its `schema_version` and `evaluation_id`
    (known when every row is read)."""
    raw = str(row.get("question") or "")
    answer = row.get("answer") or []
    reference = [str(a) for a in answer] if isinstance(answer, list) else [str(answer)]
    hard = row.get("hard")
    body: dict[str, Any] = {
        "model_id": model,
        "evaluation_name": COLLECTION,
        "evaluation_result_id": COLLECTION,
        "sample_id": str(row["id"]),
        "sample_hash": hashlib.sha256(
            json.dumps({"raw": raw, "reference": reference}, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest(),
        "interaction_type": "single_turn",
        "input": {"raw": raw, "reference": reference},
    }
    choices = row.get("choices")
    if isinstance(choices, list) and choices:
        body["input"]["choices"] = [
            f"{c.get('label')}. {c.get('text')}" if isinstance(c, dict) else str(c) for c in choices
        ]
    prompt = _prompt_text(row.get("messages"))
    if prompt:
        body["input"]["formatted"] = prompt
    response = row.get("response")
    body["output"] = {"raw": [] if response is None else [str(response)]}
    reasoning = _reasoning(row)
    if reasoning:
        body["output"]["reasoning_trace"] = [reasoning]
    extracted = row.get("extracted")
    body["answer_attribution"] = (
        []
        if extracted is None
        else [
            {
                "turn_idx": 0,
                "source": "output.raw",
                "extracted_value": str(extracted),
                "extraction_method": str(row.get("decided_by") or "unknown"),
                "is_terminal": True,
            }
        ]
    )
    body["evaluation"] = {"score": 1.0 if hard == 1 else 0.0, "is_correct": hard == 1}
    usage = _usage(row.get("usage"))
    if usage:
        body["token_usage"] = usage
    latency = row.get("latency_s")
    if isinstance(latency, int | float) and not isinstance(latency, bool) and 0 <= latency < math.inf:
        body["performance"] = {"latency_ms": latency * 1000}
    failure = row.get("error") or row.get("judge_error")
    if failure or hard is None or row.get("undecided"):
        body["error"] = str(failure or ("no judge decided (undecided)" if hard is not None else "no verdict"))
    verdict = "right" if hard == 1 else "wrong" if hard == 0 and not row.get("undecided") else "none"
    body["metadata"] = {
        "run": str(row.get("run", 0)),
        "type": str(row.get("type") or "unknown"),
        "subtype": str(row.get("subtype") or "unknown"),
        "ans_type": str(row.get("ans_type") or "unknown"),
        "decided_by": str(row.get("decided_by") or "unknown"),
        "verdict": verdict if verdict != "none" else "none: counted wrong",
    }
    return body


def _prompt_text(messages: Any) -> str:
    """The text the model was sent, message by message (images as `[image]`)."""
    if not isinstance(messages, list):
        return ""
    parts = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(
                str(p.get("text", "")) if p.get("type") == "text" else "[image]"
                for p in content
                if isinstance(p, dict)
            )
        parts.append(f"{message.get('role')}: {content}")
    return "\n\n".join(parts)


def _reasoning(row: JudgedRow) -> str | None:
    turns = row.get("turns")
    last = turns[-1] if isinstance(turns, list) and turns and row.get("response") is not None else None
    text = last.get("reasoning") if isinstance(last, dict) else None
    return text if isinstance(text, str) and text else None


def _usage(usage: Any) -> dict[str, int] | None:
    """EEE's token usage (all three counts, or none: EEE takes no partial usage)."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not (isinstance(prompt, int) and isinstance(completion, int) and prompt >= 0 and completion >= 0):
        return None
    out = {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}
    extra = (("reasoning_tokens", "reasoning_tokens"), ("cached_tokens", "input_tokens_cache_read"))
    for ours, theirs in extra:
        value = usage.get(ours)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[theirs] = value
    return out
