"""What every request of a rollout carries besides its messages, as one typed record: built once
by the face that was given the settings (bv.cli from the options, bv.api from keywords) and
handed down whole (RolloutConfig's `request`, bv eval's, bv optimize's roles'), so a setting such
as `max_tokens` goes from its option to the request body under one name, by plain calls."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bv.core.errors import BadConfig
from bv.core.redaction import public_params
from bv.core.settings import body_fields, check, setting

# The request parameters with a setting of their own, in the order a request carries them.
NAMED = ("max_tokens", "temperature", "seed", "max_pixels", "extra_body")
# The named parameters a request sends, and the body fields each may be sent as.
SENT_AS = {
    "max_tokens": ("max_tokens", "max_completion_tokens"),
    "temperature": ("temperature",),
    "seed": ("seed",),
}


@dataclass(frozen=True)
class RequestParams:
    """The request parameters: `seed` is the request's sampling seed (and the chance backend's
    guess seed); `extra_body` fields sent as given (the CLI's `-p`); `params` further request body
    fields (bv.api's). `body` is what every request carries and every row records (`recorded`:
    with secrets as ***); a field given both named and in `params` with two values is refused, and
    so is a field given again in `extra_body` (sent last, it would silently win)."""

    max_tokens: int | None = setting(
        None, "--max-tokens", kind=int, low=1, help="Cap on completion tokens per turn. [default: none]"
    )
    temperature: float | None = setting(
        None, "--temperature", kind=float, low=0, help="Sampling temperature. [default: the server's]"
    )
    seed: int | None = setting(
        None, "--seed", kind=int, help="Sampling seed sent to the API (chance: the guess seed)."
    )
    max_pixels: int | None = setting(
        None, "--max-pixels", kind=int, low=1, help="Downscale larger images to this many pixels."
    )
    extra_body: Mapping[str, Any] = setting(
        None,
        "-p",
        "--param",
        factory=dict,
        multiple=True,
        convert=body_fields,
        metavar="KEY=VALUE",
        help="Extra request body field, VALUE as JSON if it parses (e.g. -p top_k=20);"
        " -p extra_body='{...}' adds each field of the object, as the openai SDK does.",
    )
    params: Mapping[str, Any] = setting(None, factory=dict, convert=dict)  # bv.api's further request fields
    body: dict[str, Any] = field(init=False, repr=False, compare=False)
    recorded: dict[str, Any] = field(init=False, repr=False, compare=False)  # secrets as ***

    def __post_init__(self) -> None:
        check(self)
        named = {name: getattr(self, name) for name in NAMED}
        named = {k: v for k, v in named.items() if v is not None and v != {}}
        clashing = sorted(k for k, v in named.items() if k in self.params and self.params[k] != v)
        if clashing:
            raise BadConfig(
                f"`params` gives {', '.join(clashing)} as well as `{clashing[0]}`", option=clashing[0]
            )
        body = {**named, **self.params}
        given = {field: name for name, fields in SENT_AS.items() if name in body for field in fields}
        given.update({key: "params" for key in self.params if key not in NAMED})
        twice = sorted(key for key in self.extra_body if key in given)
        if twice:
            key, name = twice[0], given[twice[0]]
            raise BadConfig(
                f"`{name}` and `extra_body` {key}={json.dumps(self.extra_body[key])} both set {key}:"
                " give one (the extra body field, sent last, would silently win)",
                option=name,
            )
        if "extra_body" in body:
            body["extra_body"] = dict(body.pop("extra_body"))  # last, as the command line put it
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "recorded", public_params(body))
