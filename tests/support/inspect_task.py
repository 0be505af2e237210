"""A real inspect_ai eval of a tiny BabyVision-style task, offline: the log is what inspect writes.

    python tests/support/inspect_task.py ITEMS_DIR LOG_DIR ANSWERS [EPOCHS]

The task is inspect's own multiple-choice pattern (`multiple_choice()` solver, `choice()` scorer)
over the choice items of a bv synth set (meta_data.jsonl): each sample's input is the question and
its image (inspect's ContentImage), its choices the options, its target the label, its metadata
the item's type and subtype. The model is inspect's `mockllm/model`, answering `ANSWER: X` with X
taken from ANSWERS in turn (e.g. `ABBA`), each output given its token usage so inspect counts no
tokens (its counter fetches a tiktoken encoding from the network). Prints the log's path.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path


def main(items_dir: Path, log_dir: Path, answers: str, epochs: int) -> None:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import (
        ChatMessageUser,
        ContentImage,
        ContentText,
        ModelOutput,
        ModelUsage,
        get_model,
    )
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    samples = []
    for line in (items_dir / "meta_data.jsonl").read_text().splitlines():
        item = json.loads(line)
        if item["ansType"] != "choice":
            continue
        image = ContentImage(image=str(items_dir / item["image"]))
        samples.append(
            Sample(
                id=str(item["taskId"]),
                input=[ChatMessageUser(content=[ContentText(text=item["question"]), image])],
                choices=[str(option) for option in item["options"]],
                target="ABCDEFGHIJ"[item["choiceAns"]],  # bv synth: the 0-based index of the right option
                metadata={"type": item["type"], "subtype": item["subtype"]},
            )
        )
    outputs = []
    for letter in itertools.islice(itertools.cycle(answers), len(samples) * epochs):
        output = ModelOutput.from_content("mockllm/model", f"ANSWER: {letter}")
        output.usage = ModelUsage(input_tokens=100, output_tokens=3, total_tokens=103)
        outputs.append(output)
    model = get_model("mockllm/model", custom_outputs=outputs)
    task = Task(name="babyvision_mc", dataset=samples, solver=multiple_choice(), scorer=choice())
    (log,) = inspect_eval(
        task, model=model, epochs=epochs, log_dir=str(log_dir), display="none", max_samples=1
    )
    assert log.status == "success", log.error
    print(log.location)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 2)
