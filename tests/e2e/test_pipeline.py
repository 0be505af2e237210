"""The whole pipeline as users type it, against a loopback OpenAI-compatible server."""

from __future__ import annotations

import base64
import io
import json
import re

from PIL import Image
from support.commands import jsonl, read_items, sh
from support.fakeopenai import Reply

KEY = "sk-test-abcdefghijklmnopqrstuvwxyz0123"


def image_bytes(seen) -> bytes:
    part = next(p for p in seen.body["messages"][1]["content"] if p["type"] == "image_url")
    return base64.b64decode(part["image_url"]["url"].split(",", 1)[1])


def gold_reply(sample_dir, items: list[dict], wrong_ids: set[str]):
    """A 'model' that recognises each image and answers right, except for wrong_ids, which it gets wrong."""
    by_image = {}
    for item in items:
        if item["ansType"] == "choice":
            right = "ABCDEFGH"[item["choiceAns"]]
            wrong = "ABCDEFGH"[(item["choiceAns"] + 1) % len(item["options"])]
        else:
            right, wrong = item["blankAns"], "(99,99)" if "," in item["blankAns"] else "999"
        by_image[(sample_dir / item["image"]).read_bytes()] = (str(item["taskId"]), right, wrong)

    def respond(seen):
        task_id, right, wrong = by_image[image_bytes(seen)]
        answer = wrong if task_id in wrong_ids else right
        return Reply(content=f"I looked carefully.\n\n\\boxed{{{answer}}}")

    return respond


def test_official_items_end_to_end(sample_dir, server, tmp_path):
    items = read_items(sample_dir)
    wrong = {str(items[1]["taskId"]), str(items[4]["taskId"])}
    server.responder = gold_reply(sample_dir, items, wrong)
    result = sh(
        f"bv prompt {sample_dir}/meta_data.jsonl"
        f" | bv rollout --base-url {server.base_url} --api-key {KEY} -m fake-vl -j 8"
        f" | bv judge > {tmp_path}/results.jsonl && bv report --format json {tmp_path}/results.jsonl"
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl((tmp_path / "results.jsonl").read_text())
    assert sorted(r["id"] for r in rows) == sorted(str(i["taskId"]) for i in items)
    for row in rows:
        assert row["hard"] == (0 if row["id"] in wrong else 1), row["judge_reason"]
        assert row["decided_by"] == "rules" and row["error"] is None
        assert row["messages"] and row["response"] and row["model"] == "fake-vl" and row["run"] == 0
    report = json.loads(result.stdout)["inputs"][0]
    assert report["overall"]["n"] == len(items)
    assert report["overall"]["accuracy"] == round((len(items) - 2) / len(items), 6)
    assert set(report["by_type"]) == {i["type"] for i in items}

    assert len(server.seen) == len(items)
    for seen in server.seen:
        assert seen.headers["authorization"] == f"Bearer {KEY}"
        assert seen.body["model"] == "fake-vl"
        image = next(p for p in seen.body["messages"][1]["content"] if p["type"] == "image_url")
        header, data = image["image_url"]["url"].split(",", 1)
        mime = re.fullmatch(r"data:(image/\w+);base64", header).group(1)
        picture = Image.open(io.BytesIO(base64.b64decode(data)))
        assert mime == Image.MIME[picture.format]  # the MIME type matches the bytes
        assert picture.size[0] > 50
    assert KEY not in (tmp_path / "results.jsonl").read_text() + result.stderr


def test_bv_item_schema_end_to_end(sample_dir, server, tmp_path):
    """bv's own item form, read from stdin with --image-root, gives the same verdicts."""
    items = read_items(sample_dir)
    own = []
    for item in items:
        record = {
            "id": f"x{item['taskId']}",
            "question": item["question"],
            "image": item["image"],
            "ans_type": item["ansType"],
            "type": item["type"],
            "subtype": item["subtype"],
        }
        if item["ansType"] == "choice":
            record["choices"] = [{"label": "ABCDEFGH"[i], "text": t} for i, t in enumerate(item["options"])]
            record["answer"] = "ABCDEFGH"[item["choiceAns"]]
        else:
            record["answer"] = [item["blankAns"], "an alternative"]
        own.append(json.dumps(record))
    server.responder = gold_reply(sample_dir, items, wrong_ids={str(items[0]["taskId"])})
    result = sh(
        f"bv prompt --image-root {sample_dir} | bv rollout --base-url {server.base_url} -m m -j 4"
        " | bv judge --mode rules | bv report --format json",
        input="\n".join(own) + "\n",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["inputs"][0]
    assert report["overall"]["n"] == len(items)
    assert report["overall"]["correct"] == len(items) - 1
    # No key given: the placeholder goes to a local server, never an empty header.
    assert server.seen[0].headers["authorization"] == "Bearer no-key"


def test_chance_pipeline_needs_no_endpoint(sample_dir, tmp_path):
    result = sh(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend chance --repeats 3"
        f" | bv judge --mode rules > {tmp_path}/r.jsonl && bv report {tmp_path}/r.jsonl"
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl((tmp_path / "r.jsonl").read_text())
    assert sorted({r["run"] for r in rows}) == [0, 1, 2]
    assert len(rows) == 3 * len(read_items(sample_dir))
    blank = [r for r in rows if r["ans_type"] == "blank"]
    assert blank and all(r["hard"] == 0 and r["extracted"] == "" for r in blank)
    assert "Overall" in result.stdout


def test_no_endpoint_names_both_ways_out(sample_dir):
    result = sh(f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout -m some-model")
    assert result.returncode == 1
    assert "OPENAI_API_KEY" in result.stderr and "--backend chance" in result.stderr
    assert "Traceback" not in result.stderr
