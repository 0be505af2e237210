"""Artifacts are complete: a refinement turn's follow-up prompt is in conversation.json."""

from __future__ import annotations

import json

from support.commands import bv_inproc
from support.fakeopenai import Reply


def test_conversation_has_the_follow_up_prompt(sample_dir, server, tmp_path):
    def answer(seen):
        turn = sum(1 for m in seen.body["messages"] if m["role"] == "assistant")
        return Reply(content="I think it is the first one." if turn == 0 else "\\boxed{A}")

    server.responder = answer
    out = tmp_path / "art"
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | head -2 | bv rollout --base-url {server.base_url} -m m"
        f" --max-turns 2 --no-cache --artifacts {out} -q"
    )
    assert result.returncode == 0, result.stderr
    second_turn = [s.body["messages"] for s in server.seen if len(s.body["messages"]) > 2]
    assert len(second_turn) == 2
    for folder in out.glob("0/*"):
        conversation = json.loads((folder / "conversation.json").read_text())
        roles = [m["role"] for m in conversation["messages"]]
        assert roles == ["system", "user", "assistant", "user", "assistant"], roles
        follow_up = conversation["messages"][3]
        assert follow_up in [messages[3] for messages in second_turn]  # exactly what was sent
        assert "I think it is the first one." in json.dumps(follow_up)
        assert conversation["messages"][4]["content"] == "\\boxed{A}" == conversation["response"]
        assert len(conversation["turns"]) == 2
