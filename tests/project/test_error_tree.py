"""Every exception class bv defines is a BVError (bv/core/errors.py), so `except BVError` catches
every failure bv raises on purpose; the few that are not are internal and say why here."""

from __future__ import annotations

import importlib
import pkgutil

import bv
from bv.core.errors import BVError

# Classes that never reach a caller of bv: each is raised and caught inside one module.
INTERNAL = {
    # SIGTERM unwinding the command line's stack to its exit status: a BaseException, so that no
    # `except Exception` on the way swallows it (bv.cli only; the library never sees it).
    "bv.cli.ending.Terminated": BaseException,
    # The eval's judge interrupted inside run_eval, turned into its EvalResult there.
    "bv.evaluation.evaluate._Interrupted": Exception,
}


def exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(bv.__path__, "bv."):
        if info.name == "bv.__main__":  # runs the command line when imported
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == info.name:
                found[f"{info.name}.{value.__qualname__}"] = value
    return found


def test_every_exception_class_is_a_bverror_or_named_internal():
    classes = exception_classes()
    assert {
        "bv.core.errors.Fatal",
        "bv.evaluation.config.BadOption",
        "bv.core.templates.TemplateError",
    } <= set(classes)
    outside = {name for name, cls in classes.items() if not issubclass(cls, BVError)}
    assert outside == set(INTERNAL)
    assert {name: classes[name].__bases__ for name in INTERNAL} == {k: (v,) for k, v in INTERNAL.items()}


def test_callers_catching_valueerror_still_catch_them():
    from bv.core.templates import TemplateError
    from bv.evaluation.config import BadOption
    from bv.optimize.results import OptimizeError

    for cls in (BadOption, OptimizeError, TemplateError):
        assert issubclass(cls, BVError) and issubclass(cls, ValueError)
