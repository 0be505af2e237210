"""`bv export --format hf-eval-results`: judged rows as the Hugging Face Hub's evaluation results
of a model repo (huggingface.co/docs/hub/eval-results): `.eval_results/<name>.yaml`, one file
per protocol variant (bv.reporting.protocol_variant), each a YAML list of one result with the
keys the Hub reads: `dataset.id` and `dataset.task_id` (required), `value` (required), `date`
and `notes`. `source` (a URL) and `verifyToken` are left out: bv has neither.

The YAML is written without a YAML library: every string is a double-quoted scalar in JSON's
escapes, which YAML reads the same, with each character YAML does not allow raw (controls, DEL,
the C1 range, line and paragraph separators, the byte-order mark) escaped too, so a model name
or skill name holding quotes, colons, newlines or escapes stays one string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from bv.core.items import BENCHMARK_REPO
from bv.core.records import JudgedRow
from bv.core.stats import counted
from bv.reporting.export_folder import replace_folder
from bv.reporting.protocol_variant import Measured, by_variant, variant_notes
from bv.reporting.report_types import Summary

OWNED = ".eval_results"  # the folder of a model repo the Hub reads
TASK_ID = "default"  # the dataset's one task
FILE = "babyvision_{slug}.yaml"
# Characters YAML 1.1 and 1.2 take raw in a double-quoted scalar; the rest are escaped.
_NOT_RAW = re.compile("[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")


def yaml_string(text: str) -> str:
    """`text` as a YAML double-quoted scalar that reads back as `text`."""
    return _NOT_RAW.sub(_escape, json.dumps(text, ensure_ascii=False))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def write_hf_eval_results(rows: Iterable[JudgedRow], out_dir: Path) -> list[tuple[Path, int]]:
    """Write `out_dir/.eval_results/*.yaml` as one new folder (bv.reporting.export_folder);
    returns each file and the rows behind it."""
    measured: dict[str, Measured] = {}
    for held, _ in by_variant(rows):
        measured.setdefault(held.variant.key, held)
    texts, counts = {}, {}
    for held in measured.values():
        name = FILE.format(slug=held.variant.slug())
        summary = held.tally.summary(held.variant.model)
        texts[name], counts[name] = entry(held, summary), summary["overall"]["rows"]

    def write(staged: Path) -> None:
        folder = staged / OWNED
        folder.mkdir()
        for name, text in texts.items():
            (folder / name).write_text(text, encoding="utf-8")

    replace_folder(out_dir, OWNED, write)
    return [(out_dir / OWNED / name, counts[name]) for name in sorted(texts)]


def entry(measured: Measured, summary: Summary) -> str:
    """One variant's result as the Hub's YAML: accuracy in percent over all rows."""
    overall = summary["overall"]
    accuracy = overall["accuracy"] or 0.0
    lines = [
        "- dataset:",
        f"    id: {yaml_string(BENCHMARK_REPO)}",
        f"    task_id: {yaml_string(TASK_ID)}",
        f"  value: {round(accuracy * 100, 2)}",
    ]
    started = summary["provenance"]["started_at"]
    if started:
        lines.append(f"  date: {yaml_string(started['first'])}")
    lines.append(f"  notes: {yaml_string(notes(measured, summary))}")
    return "\n".join(lines) + "\n"


def notes(measured: Measured, summary: Summary) -> str:
    """The protocol and bv's figures in one line: what the Hub's `value` alone does not say."""
    overall, said = summary["overall"], variant_notes(measured.variant, summary)
    versions = ", ".join(summary["provenance"]["bv_versions"]) or "unknown"
    parts = [f"bv {versions}", f"model {said['model']}", f"style {said['style']}"]
    if "skill" in said or "skill_sha256" in said:
        parts.append(f"skill {said.get('skill', '')} (sha256 {said.get('skill_sha256', 'unknown')[:12]})")
    parts.append(f"judge {said['judge_models']}")
    parts.append(f"{counted(overall['runs'], 'run')} of {counted(overall['n'], 'item')}")
    ci = overall["ci95"]
    if ci is not None:
        parts.append(f"95% CI over items {ci[0] * 100:.1f}-{ci[1] * 100:.1f}")
    failed = overall["errors"] + overall["judge_errors"] + overall["undecided"]
    if failed:
        parts.append(
            f"{counted(failed, 'failed row')} counted wrong ({overall['errors']} rollout errors,"
            f" {overall['judge_errors']} judge errors, {overall['undecided']} undecided)"
        )
    if "params" in said:
        parts.append(f"params {said['params']}")
    return "; ".join(parts)
