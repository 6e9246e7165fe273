"""Which of two keys that disagree the stack file most likely got wrong: the one it sets, rather than one it leaves to
the schema's default (a default is the Target Configuration, checked by every test); of two it sets (or two defaults),
the caller's second. A refusal is reported at that key and names the other beside it.
"""

from __future__ import annotations

from pydantic import BaseModel

from core.config import StackConfig


def set_in_file(cfg: StackConfig, path: str) -> bool:
    """Whether the stack file sets the key `path` (`decode.sidecar.port`, camelCase or snake_case), not its default."""
    section: BaseModel = cfg
    parts = path.split(".")
    for index, part in enumerate(parts):
        names = {info.alias or name: name for name, info in type(section).model_fields.items()}
        field = names.get(part, part)
        if field not in section.model_fields_set:
            return False
        value = getattr(section, field)
        if index == len(parts) - 1:
            return True
        if not isinstance(value, BaseModel):
            return False
        section = value
    return False


def likely_wrong(cfg: StackConfig, first: str, second: str) -> str:
    """Of two keys that disagree, the one to report at: the one the stack file sets, else `second`."""
    if set_in_file(cfg, first) and not set_in_file(cfg, second):
        return first
    return second
