"""bv.api's keywords with their types, one TypedDict per function that takes settings (written by
bv/api/keyword_types.py from the declared settings: do not edit by hand). bv.api imports it for
the type checker only; its annotations are evaluated, so that `Required` shows at run time too."""

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Required, TypedDict

from bv.core.templates import Templates


class RolloutKeywords(TypedDict, total=False):
    """The keywords of RolloutConfig."""

    jobs: int
    retries: int
    timeout: float
    rate_limit_patience: float
    connect_timeout: float
    first_byte_timeout: float | None
    read_timeout: float | None
    stall_notice: float
    cache: str | Path | None
    cache_scope: str
    quiet: bool
    batch: bool
    prices: str | None
    max_cost: float | None
    backend: str
    model: str | None
    base_url: str | Iterable[str]
    api_key: str | None
    exec_cmd: str | None
    max_tokens: int | None
    temperature: float | None
    seed: int | None
    max_pixels: int | None
    extra_body: Mapping[str, Any] | Iterable[str]
    params: Mapping[str, Any]
    repeats: int
    max_turns: int
    shard: str | tuple[int, int] | None
    artifacts: str | Path | None
    templates: Templates
    keep_workdirs: str | None


class JudgeKeywords(TypedDict, total=False):
    """The keywords of JudgeConfig."""

    jobs: int
    retries: int
    timeout: float
    rate_limit_patience: float
    connect_timeout: float
    first_byte_timeout: float | None
    read_timeout: float | None
    stall_notice: float
    cache: str | Path | None
    cache_scope: str
    quiet: bool
    batch: bool
    prices: str | None
    max_cost: float | None
    mode: str
    judge_model: str | Iterable[str] | None
    judge_base_url: str | Iterable[str] | None
    judge_api_key: str | Iterable[str] | None
    panel: str
    judge_params: Mapping[str, Any] | Iterable[str]
    calibrate: float | None
    templates: Templates


class EvalKeywords(TypedDict, total=False):
    """The keywords of EvalConfig."""

    label: str | None
    style: str
    skill: str | Path | None
    prompts: str | Path | None
    image_detail: str
    ids: Iterable[str]
    types: Iterable[str]
    subtypes: Iterable[str]
    sample: int | None
    sample_seed: int
    limit: int | None
    backend: str
    model: str | None
    base_url: str | Iterable[str]
    api_key: str | None
    repeats: int
    max_turns: int
    max_tokens: int | None
    temperature: float | None
    seed: int | None
    max_pixels: int | None
    extra_body: Mapping[str, Any] | Iterable[str]
    params: Mapping[str, Any]
    exec_cmd: str | None
    mode: str
    judge_model: str | Iterable[str] | None
    judge_base_url: str | Iterable[str] | None
    judge_api_key: str | Iterable[str] | None
    judge_params: Mapping[str, Any] | Iterable[str]
    panel: str
    calibrate: float | None
    prices: str | None
    max_cost: float | None
    batch: bool
    jobs: int
    retries: int
    timeout: float
    rate_limit_patience: float
    connect_timeout: float
    first_byte_timeout: float | None
    read_timeout: float | None
    stall_notice: float
    cache: str | Path | None
    cache_scope: str
    quiet: bool
    skip_bad: bool
    track: str | Iterable[str]
    track_project: str | None
    track_entity: str | None


class OptimizeKeywords(TypedDict, total=False):
    """The keywords of OptimizeSettings."""

    skill: Required[Any]
    out: Required[str | Path]
    optimizer_model: Required[str | None]
    optimizer_base_url: str | None
    optimizer_api_key: str | None
    optimizer_temperature: float | None
    optimizer_params: Mapping[str, Any]
    backend: str
    model: str | None
    base_url: str | Iterable[str]
    api_key: str | None
    max_turns: int
    max_tokens: int | None
    temperature: float | None
    seed: int | None
    max_pixels: int | None
    extra_body: Mapping[str, Any] | Iterable[str]
    params: Mapping[str, Any]
    mode: str
    judge_model: str | Iterable[str] | None
    judge_base_url: str | Iterable[str] | None
    judge_api_key: str | Iterable[str] | None
    judge_params: Mapping[str, Any] | Iterable[str]
    test_judge_model: str | None
    test_judge_base_url: str | None
    test_judge_api_key: str | None
    ratio: str | Sequence[int]
    split: str | Path | None
    split_seed: int
    budget: int
    epochs: int | None
    steps: int | None
    batch_size: int
    minibatch: int
    success_share: float
    edits: int
    alpha: float
    gate: str
    refresh: int
    repeats: int
    max_skill_chars: int
    prompts: str | Path | None
    templates: Any
    jobs: int
    retries: int
    timeout: float
    rate_limit_patience: float
    connect_timeout: float
    first_byte_timeout: float | None
    read_timeout: float | None
    stall_notice: float
    prices: str | None
    max_cost: float | None
    cache: str | Path | None
    cache_scope: str
    quiet: bool
    search: str
    track: str | Iterable[str]
    track_project: str | None
    track_entity: str | None
    max_metric_calls: int | None
