"""A mypy plugin (setup.cfg [mypy] plugins): `record.get("key")` on a TypedDict must name one of
its keys.

mypy refuses `row["hrad"]` on a TypedDict but lets `row.get("hrad")` pass (TypedDicts may carry
extra keys, so it returns `object`), and bv's readers use `.get` for every field an old or
hand-made row may lack. With this plugin a misspelt key is an error in both forms
(tests/project/test_typed_keys.py proves it on a copy of a reader).
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.errorcodes import TYPEDDICT_ITEM
from mypy.plugin import MethodContext, Plugin
from mypy.plugins.default import typed_dict_get_callback
from mypy.typeops import try_getting_str_literals
from mypy.types import Type, TypedDictType

_GET = "typing.Mapping.get"


def _checked_get(ctx: MethodContext) -> Type:
    if isinstance(ctx.type, TypedDictType) and ctx.args and ctx.args[0]:
        keys = try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0]) or []
        name = ctx.type.fallback.type.name
        for key in keys:
            if key not in ctx.type.items:
                ctx.api.fail(f'TypedDict "{name}" has no key "{key}"', ctx.context, code=TYPEDDICT_ITEM)
    return typed_dict_get_callback(ctx)  # the type mypy itself gives the value


class TypedKeys(Plugin):
    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _checked_get if fullname == _GET else None


def plugin(version: str) -> type[Plugin]:
    return TypedKeys
