"""Parsing the `rebel100:` config namespace: values of a Pulumi config map, and pydantic's errors as issues naming
the key path, the value, what the field accepts and the key that was meant (did-you-mean).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import re
import typing
from typing import Any

import pydantic
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from core.config import (
    MOVED_KEYS,
    MOVED_KEYS_DOCS,
    NAMESPACE,
    SCALAR_TYPES,
    SECRET_KEYS,
    StackConfig,
    unwrap_optional,
)
from core.gate.issues import Issue, key

Loc = tuple[int | str, ...]  # a key's path in a config, as pydantic reports it


def namespace_values(raw: dict[str, Any]) -> dict[str, Any]:
    """The `rebel100:` keys of a Pulumi config map, objects decoded from their JSON text."""
    values: dict[str, Any] = {}
    prefix = f"{NAMESPACE}:"
    for full_key, value in raw.items():
        if not full_key.startswith(prefix):
            continue
        name = full_key[len(prefix) :]
        if name in SECRET_KEYS:
            continue
        if isinstance(value, str) and value[:1] in "{[":
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(value)
        values[name] = value
    return values


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """A section's fields by both spellings a stack file may use (populate_by_name): `kvTier` and `kv_tier`."""
    return {**dict(model.model_fields), **{info.alias or name: info for name, info in model.model_fields.items()}}


def _field_models(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The section model that `loc` (aliases or field names) points into, or None."""
    current: Any = model
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = _fields(current).get(str(part))
        if info is None:
            return None
        current = unwrap_optional(info.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _field_info(model: type[BaseModel], loc: Loc) -> FieldInfo | None:
    parent = _field_models(model, loc[:-1])  # the model itself for a top-level key
    if parent is None:
        return None
    return _fields(parent).get(str(loc[-1]))


def _is_map(loc: Loc) -> bool:
    """Whether `loc` is a map field (extraEnv, podAnnotations), whose keys the user chooses."""
    info = _field_info(StackConfig, loc) if loc else None
    return info is not None and typing.get_origin(unwrap_optional(info.annotation)) is dict


def _allowed(info: FieldInfo | None) -> str:
    """What a field accepts, from its annotation and bounds."""
    if info is None:
        return ""
    parts = []
    for constraint in info.metadata:
        for attr, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            bound = getattr(constraint, attr, None)
            if bound is not None:
                parts.append(f"{symbol} {bound}")
        pattern = getattr(constraint, "pattern", None)
        if pattern:
            parts.append(f"matching {pattern}")
    literal = (
        [a for a in typing.get_args(unwrap_optional(info.annotation))]
        if typing.get_origin(unwrap_optional(info.annotation)) is typing.Literal
        else []
    )
    if literal:
        return "allowed: " + ", ".join(repr(v) for v in literal)
    return ("allowed: " + " and ".join(parts)) if parts else ""


# pydantic's error of a value of another kind (the schema's types are strict) -> the type as the reference names it.
TYPE_ERRORS = {"int_type": "int", "float_type": "float", "bool_type": "bool", "string_type": "str"}
_NUMBER_TEXT = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def yaml_text(value: Any) -> str:
    """A value as a stack file writes it (the JSON of a scalar is its YAML): true, "4", 4.5, null."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _kind(value: Any) -> str:
    """What the stack file's YAML made of a value, in its words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a floating-point number" if value.is_integer() else "a number with a fraction"
    if isinstance(value, str):
        if _NUMBER_TEXT.fullmatch(value.strip()):
            return "a quoted number (text)"
        if value in ("true", "false"):
            return "a quoted boolean (text)"
        return "text"
    return "a list" if isinstance(value, list) else "a map"


def _unquoted(value: Any, wanted: str) -> Any:
    """The value a quoted number or boolean meant, when it is one of the wanted type; else None."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if wanted == "bool" and text in ("true", "false"):
        return text == "true"
    if wanted in ("int", "float") and _NUMBER_TEXT.fullmatch(text):
        number = float(text)
        if not math.isfinite(number):
            return None
        if wanted == "float":
            return int(number) if number.is_integer() and abs(number) < 2**53 else number
        return int(number) if number.is_integer() and abs(number) < 2**63 else None
    return None


def _example(info: FieldInfo | None, wanted: str) -> Any:
    """A value of the wanted type to show in the fix: the field's default when it is one."""
    default = None if info is None or info.is_required() else info.get_default(call_default_factory=True)
    python: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}
    if isinstance(default, python[wanted]) and not (wanted != "bool" and isinstance(default, bool)):
        return default
    return None


def _type_message(loc: Loc, value: Any, wanted: str, info: FieldInfo | None, allowed: str) -> str:
    """A value of another kind than the key's type: the value as written, what it is, the type and what it takes, and
    the fix (the unquoted value, or the kind of value to write)."""
    dotted = _dotted(loc)
    # How the fix writes the value: under its key, or as an item of a list.
    entry = "- " if isinstance(loc[-1], int) else f"{loc[-1]}: "
    article = "an" if wanted == "int" else "a"
    bounds = f" ({allowed})" if allowed else ""
    meant = _unquoted(value, wanted)
    if meant is not None:
        fix = f"Write it without the quotes: `{entry}{yaml_text(meant)}`."
    elif wanted == "str" and isinstance(value, (bool, int, float)):
        fix = f'Quote it: `{entry}"{yaml_text(value)}"`.'
    else:
        example = _example(info, wanted)
        shown = f", e.g. `{entry}{yaml_text(example)}`" if example is not None else ""
        what = {"int": "a whole number", "float": "a number", "bool": "true or false", "str": "text"}[wanted]
        fix = f"Write {what} in its place{shown}."
    return (
        f"{yaml_text(value)} is {_kind(value)}, but {dotted} takes {article} {wanted}{bounds}: "
        f"{SCALAR_TYPES[wanted]}. {fix}"
    )


def _dotted(loc: Loc) -> str:
    """`prefill.extraArgs[0]`: a key path as the stack file spells it, without the namespace."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _path(loc: Loc) -> str:
    return key(_dotted(loc))


def _pydantic_issues(error: pydantic.ValidationError) -> list[Issue]:
    issues = []
    for err in error.errors():
        loc = tuple(err["loc"])
        path = _path(loc)
        dotted = ".".join(str(part) for part in loc)
        moved = MOVED_KEYS.get(dotted)
        if err["type"] == "extra_forbidden" and moved:
            docs = MOVED_KEYS_DOCS.get(dotted.split(".", 1)[0], "the README")
            issues.append(Issue(path, f"this key moved: set `{key(moved)}` instead (see {docs})."))
            continue
        if err["type"] == "extra_forbidden":
            # pydantic reports an unknown key only inside a model, and the lookup takes both spellings of the
            # sections on the way (`kv_tier` too), so `parent` is the model of the section the key is in.
            parent = _field_models(StackConfig, loc[:-1])
            assert parent is not None  # pydantic reports an unknown key inside a model only
            valid = sorted(info.alias or name for name, info in parent.model_fields.items())
            if len(loc) == 1:
                valid += sorted(SECRET_KEYS)
            close = difflib.get_close_matches(str(loc[-1]), valid)  # best first
            hint = f" Did you mean `{_path((*loc[:-1], close[0]))}`?" if close else ""
            issues.append(Issue(path, f"unknown key.{hint} Valid keys here: {', '.join(valid)}."))
            continue
        if loc[-1:] == ("[key]",) and _is_map(loc[:-2]):
            # A key of a map (extraEnv, podAnnotations): the path is the map's, the value the key. pydantic names the
            # key's own check `[key]`, but a map may also hold a key spelled `[key]` whose value is wrong: that one's
            # loc ends at the map's key, not two parts below the map, and is reported like any value below.
            *map_loc, name, _ = loc
            issues.append(Issue(_path(tuple(map_loc)), f"key {name!r} is not valid: {err['msg']}."))
            continue
        value = err.get("input")
        info = _field_info(StackConfig, loc)
        allowed = _allowed(info)
        if err["type"] in TYPE_ERRORS:
            issues.append(Issue(path, _type_message(loc, value, TYPE_ERRORS[err["type"]], info, allowed)))
            continue
        message = f"{value!r} is not valid: {err['msg']}."
        if allowed:
            message += f" ({allowed})"
        issues.append(Issue(path, message))
    return issues
