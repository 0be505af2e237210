"""Keys stay secret everywhere bv writes; artifacts are per item, under safe names."""

from __future__ import annotations

import json

from support.commands import bv_inproc, jsonl, sh
from support.fakeopenai import Reply

from bv.stages.artifacts import safe_name

KEY = "sk-proj-Q7vT2mXw9LkP4nRz8YbC3dHs6JfG1aE5uV0iO"
JUDGE_KEY = "jk-9f8e7d6c5b4a39281706f5e4d3c2b1a0"


def echoing_server(seen):
    """A server that, like real ones, quotes the key back in error messages (and here in replies)."""
    auth = seen.headers.get("authorization", "")
    text = json.dumps(seen.body)
    judge = seen.body.get("temperature") == 0
    if ("Which row and column" in text and not judge) or ("lettered point" in text and judge):
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {auth[7:]}. Try again."}})
        return Reply(status=400, body=body.encode())
    if judge:
        return Reply(content="True")
    return Reply(content=f"I think so. \\boxed{{row 2 column 3}} [{auth}]")


def test_no_key_in_any_output_artifact_or_cache(sample_dir, server, tmp_path):
    server.responder = echoing_server
    cache, artifacts = tmp_path / "cache.sqlite", tmp_path / "artifacts"
    result = sh(  # a real pipeline, as users type it
        f"bv prompt {sample_dir}/meta_data.jsonl"
        f" | bv rollout --base-url {server.base_url} --api-key {KEY} -m m --cache {cache}"
        f" --artifacts {artifacts}"
        f" | bv judge --judge-model j --judge-base-url {server.base_url} --judge-api-key {JUDGE_KEY}"
        f" --cache {cache} > {tmp_path}/results.jsonl; echo pipeline exit $? >&2"
        f"; bv report {tmp_path}/results.jsonl --html {tmp_path}/report.html",
        env={"OPENAI_API_KEY": KEY},
    )
    # Some rows failed (exit 1), every row was written, and the report of them is made.
    assert "pipeline exit 1" in result.stderr and "Traceback" not in result.stderr
    assert (tmp_path / "report.html").exists(), result.stderr
    assert result.returncode == 1  # the report of failed rows exits 1 too
    rows = jsonl((tmp_path / "results.jsonl").read_text())
    assert any(r["error"] and "Incorrect API key provided: ***" in r["error"] for r in rows)
    assert any(r["decided_by"] == "llm" for r in rows)
    assert any(r["judge_error"] and "Incorrect API key provided: ***" in r["judge_error"] for r in rows)
    help_text = bv_inproc("bv rollout --help", env={"OPENAI_API_KEY": KEY}).stdout
    blobs = {"stdout": result.stdout, "stderr": result.stderr, "help": help_text}
    for path in [*tmp_path.rglob("*")]:
        if path.is_file():
            blobs[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    assert any("artifacts" in name for name in blobs) and any("cache.sqlite" in name for name in blobs)
    for key in (KEY, JUDGE_KEY):
        for name, text in blobs.items():
            assert key not in text, f"the key leaked into {name}"
            assert key[-16:] not in text and key[:14] not in text, f"part of the key leaked into {name}"


def test_artifacts_per_run_and_item(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="\\boxed{A}")
    items = tmp_path / "items.jsonl"
    (tmp_path / "images").mkdir()
    image = next((sample_dir / "images").iterdir())
    (tmp_path / "images" / image.name).write_bytes(image.read_bytes())
    odd_ids = ["../../escape", "a/b", ".hidden", "plain-7"]
    items.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "question": "Which?",
                    "image": f"images/{image.name}",
                    "ans_type": "choice",
                    "choices": ["x", "y"],
                    "answer": "A",
                }
            )
            + "\n"
            for i in odd_ids
        )
    )
    out = tmp_path / "art"
    result = bv_inproc(
        f"bv prompt {items} | bv rollout --base-url {server.base_url} -m m --repeats 2 --no-cache"
        f" --artifacts {out}"
    )
    assert result.returncode == 0, result.stderr
    folders = sorted(p.relative_to(out) for p in out.glob("*/*"))
    assert len(folders) == 8 and {p.parts[0] for p in folders} == {"0", "1"}
    assert all(p.resolve().is_relative_to(out.resolve()) for p in out.rglob("*"))
    for folder in out.glob("*/*"):
        assert sorted(f.name for f in folder.iterdir()) == ["conversation.json", "system.md", "user.md"]
        conversation = json.loads((folder / "conversation.json").read_text())
        assert conversation["id"] in odd_ids and conversation["turns"][0]["content"] == "\\boxed{A}"
        assert "## Question" in (folder / "user.md").read_text()
        assert "## Answer Format" in (folder / "system.md").read_text()
    assert (out / "0" / "plain-7").is_dir()


def test_safe_names():
    assert safe_name("plain-7") == "plain-7" and safe_name("445") == "445"
    for unsafe in ["../../etc", "a/b", ".hidden", "..", ".", "", "x\0y", "é"]:
        name = safe_name(unsafe)
        assert "/" not in name and not name.startswith(".") and name not in ("", ".", "..")
    assert safe_name("a/b") != safe_name("a_b")  # ids that would collide get their own folders


def test_safe_names_are_short_and_case_proof():
    long_id = "x" * 300
    assert len(safe_name(long_id)) <= 90 and safe_name(long_id) != safe_name("x" * 299)
    assert safe_name("A").lower() != safe_name("a").lower()  # one folder each, even on macOS


def test_unwritable_artifacts_never_cost_the_row(sample_dir, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend chance --artifacts {blocker}/runs"
    )
    assert result.returncode == 0 and len(jsonl(result.stdout)) == 12
    assert "artifacts of id" in result.stderr and "Traceback" not in result.stderr
