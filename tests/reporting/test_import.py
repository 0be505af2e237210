"""bv import without the shared official files: results joined with their items, and items alone."""

from __future__ import annotations

import json

from support.commands import bv_inproc, jsonl, read_items


def fake_results(sample_dir, tmp_path):
    """An official-format result file for the sample items: right on even ids."""
    results = []
    for item in read_items(sample_dir):
        gold = "ABCDEFGH"[item["choiceAns"]] if item["ansType"] == "choice" else item["blankAns"]
        right = item["taskId"] % 2 == 0
        results.append(
            {
                "Id": item["taskId"],
                "Question": item["question"],
                "ModelResult": f"\\boxed{{{gold}}}",
                "GroundTruth": gold,
                "ExtractedAnswer": gold,
                "LLMJudgeResult": right,
                "Type": item["type"],
                "Subtype": item["subtype"],
            }
        )
    path = tmp_path / "model_results_run_2.json"
    path.write_text(json.dumps(results))
    return path


def test_results_joined_with_items_get_choices_and_images(sample_dir, tmp_path):
    path = fake_results(sample_dir, tmp_path)
    result = bv_inproc(
        f"bv import --items {sample_dir}/meta_data.jsonl --run 9 {path} > {tmp_path}/rows.jsonl"
        f" && bv report {tmp_path}/rows.jsonl --format json --html {tmp_path}/r.html"
        f" --image-root {sample_dir}"
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl((tmp_path / "rows.jsonl").read_text())
    assert {r["run"] for r in rows} == {1}  # the file's name says run 2; --run is for names without one
    choice = next(r for r in rows if r["ans_type"] == "choice")
    assert choice["choices"] and choice["answer"][0] in "ABCD" and choice["decided_by"] == "imported"
    assert all(r["images"][0].startswith("/") for r in rows)
    assert json.loads(result.stdout)["inputs"][0]["overall"]["correct"] == sum(
        i["taskId"] % 2 == 0 for i in read_items(sample_dir)
    )
    page = (tmp_path / "r.html").read_text()
    assert "image missing" not in page and page.count("data:image/") >= len(rows)


def test_items_alone_become_bv_items(sample_dir, tmp_path):
    result = bv_inproc(
        f"bv import {sample_dir}/meta_data.jsonl > {sample_dir}/items-bv.core.jsonl"
        f" && bv prompt {sample_dir}/items-bv.core.jsonl | head -1"
    )
    assert result.returncode == 0, result.stderr
    item = jsonl((sample_dir / "items-bv.core.jsonl").read_text())[0]
    assert set(item) >= {"id", "question", "ans_type", "choices", "answer", "type", "subtype", "images"}
    assert "taskId" not in item and len(jsonl(result.stdout)) == 1
    (sample_dir / "items-bv.core.jsonl").unlink()
