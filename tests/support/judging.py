"""Rollout rows for `bv judge`'s tests, and its command line against a loopback judge."""

from __future__ import annotations

import json


def rollout_rows(tmp_path, answers: list[str]) -> str:
    """Rollout rows for blank items whose gold is '(2,3)', answered with `answers`."""
    rows = []
    for i, answer in enumerate(answers):
        rows.append(
            {
                "id": str(i),
                "run": 0,
                "question": f"Where is the odd one? ({i})",
                "ans_type": "blank",
                "choices": [],
                "answer": ["(2,3)"],
                "type": "T",
                "subtype": "S",
                "model": "m",
                "response": f"It is \\boxed{{{answer}}}" if answer is not None else "no idea",
                "error": None,
            }
        )
    rows.append(
        {
            "id": "c",
            "run": 0,
            "question": "Which colour?",
            "ans_type": "choice",
            "answer": ["B"],
            "choices": [{"label": "A", "text": "red"}, {"label": "B", "text": "blue"}],
            "type": "T",
            "subtype": "S2",
            "model": "m",
            "response": "\\boxed{B}",
            "error": None,
        }
    )
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def judge_cmd(server, path, mode="auto", cache=None, options="") -> str:
    cache_opt = f"--cache {cache}" if cache else "--no-cache"
    return (
        f"bv judge --mode {mode} --judge-model judge-m --judge-base-url {server.base_url}"
        f" --judge-api-key jk {cache_opt} {options} {path}"
    )
