"""Parsing the `rebel100:` config namespace: values of a Pulumi config map, and pydantic's errors as issues naming
the key path, the value, what the field accepts and the key that was meant (did-you-mean).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import typing
from typing import Any

import pydantic
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from core.config import MOVED_KEYS, MOVED_KEYS_DOCS, NAMESPACE, SECRET_KEYS, StackConfig, unwrap_optional
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


def _path(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return key(text)


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
        allowed = _allowed(_field_info(StackConfig, loc))
        message = f"{value!r} is not valid: {err['msg']}."
        if allowed:
            message += f" ({allowed})"
        issues.append(Issue(path, message))
    return issues
