"""bv.stages.request_params: what every request of a rollout carries, built once from the settings."""

from __future__ import annotations

import pytest
from support.commands import bv_inproc


@pytest.mark.parametrize(
    ("options", "named", "field"),
    [
        ("--temperature 0.9 -p temperature=0.5", "--temperature", "temperature=0.5"),
        ("--max-tokens 64 --param max_completion_tokens=8", "--max-tokens", "max_completion_tokens=8"),
        ("--seed 3 -p extra_body='{\"seed\": 4}'", "--seed", "seed=4"),
    ],
)
def test_a_named_setting_and_the_same_field_in_p_are_refused(prompts, options, named, field):
    """-p's fields are sent last: -p temperature=0.5 silently beat --temperature 0.9. Both given
    is refused before any request, naming both."""
    done = bv_inproc(f"bv rollout {prompts} -m m --base-url http://127.0.0.1:9/v1 {options}")
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert f"{named} and -p/--param {field} both set" in done.stderr, done.stderr


def test_the_same_field_in_params_and_extra_body_is_refused():
    from bv.stages.request_params import RequestParams

    with pytest.raises(ValueError, match="`params` and `extra_body` top_k=20 both set top_k"):
        RequestParams(params={"top_k": 10}, extra_body={"top_k": 20})
    assert RequestParams(temperature=0.9, extra_body={"top_k": 20}).body["extra_body"] == {"top_k": 20}
