"""YAML read the way the Pulumi CLI reads a stack file: gopkg.in/yaml.v3 v3.0.1 decoding into `any`.

The CLI (3.274.1, sdk/go/common/workspace/loaders.go LoadProjectStackBytes) decodes the file with yaml.v3,
which is neither YAML 1.1 (PyYAML's `safe_load`) nor strict YAML 1.2: `yes`/`on`/`off` are strings, but
`1_000`, `0o17`, `017` (octal) and `0x1F` are integers, `2001-12-14` a timestamp, and a key defined twice
in one mapping is an error. The syntax (events: scalars with their style and tag, mappings, sequences,
anchors and aliases) comes from PyYAML's parser, a port of libyaml like yaml.v3's own parser; the typing is
ported here from yaml.v3 (resolve.go `resolve`, decode.go `scalar`, `mapping`, `merge`). The differential
test `tests/e2e/test_stackfile_cli.py` holds the port to the real CLI on a corpus of tricky files.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime
import math
import re
from typing import Any

import yaml

STR, BOOL, INT, FLOAT, NULL, TIMESTAMP, MERGE, BINARY = (
    "!!str",
    "!!bool",
    "!!int",
    "!!float",
    "!!null",
    "!!timestamp",
    "!!merge",
    "!!binary",
)
_LONG_PREFIX = "tag:yaml.org,2002:"
_RESOLVABLE = {"", STR, BOOL, INT, FLOAT, NULL, TIMESTAMP}
_MAP_VALUES = {
    **{s: (BOOL, True) for s in ("true", "True", "TRUE")},
    **{s: (BOOL, False) for s in ("false", "False", "FALSE")},
    **{s: (NULL, None) for s in ("", "~", "null", "Null", "NULL")},
    **{s: (FLOAT, math.nan) for s in (".nan", ".NaN", ".NAN")},
    **{s: (FLOAT, math.inf) for s in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{s: (FLOAT, -math.inf) for s in ("-.inf", "-.Inf", "-.INF")},
    "<<": (MERGE, "<<"),
}
_HINTS = {**{c: "S" for c in "+-"}, **{c: "D" for c in "0123456789"}, **{c: "M" for c in "yYnNtTfFoO~"}, ".": "."}
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INT64, _UINT64 = 2**63, 2**64
MAX_DECODED = 200_000  # nodes decoded, aliases expanded (a real stack file has hundreds)


class YamlError(ValueError):
    """What yaml.v3 refuses, worded as the CLI words it (`line 3: mapping key "a" already defined at line 2`)."""


@dataclasses.dataclass(frozen=True)
class Timestamp:
    """A yaml.v3 timestamp (a Go time.Time), kept with the text it was read from."""

    value: datetime.datetime

    def go_string(self) -> str:
        """Go's Time.String(), which Pulumi stores for a time value: `2001-12-14 00:00:00 +0000 UTC`."""
        moment = self.value
        text = moment.strftime("%Y-%m-%d %H:%M:%S")
        if moment.microsecond:
            text += f".{moment.microsecond:06d}".rstrip("0")
        offset = moment.utcoffset() or datetime.timedelta(0)
        minutes = int(offset.total_seconds() // 60)
        sign = "-" if minutes < 0 else "+"
        zone = f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
        return f"{text} {zone} {'UTC' if minutes == 0 else zone}"


class GeneralMap(dict[str, Any]):
    """A mapping with a key that is not a string (yaml.v3 `map[interface{}]interface{}`); such keys are
    `TypedKey`s."""


@dataclasses.dataclass(frozen=True)
class TypedKey:
    """A map key that is not a string, compared by Go type and value (Python would merge `1`, `1.0` and
    `True` into one key; Go keeps int 1, float64 1 and true apart)."""

    value: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypedKey) and type(self.value) is type(other.value) and self.value == other.value

    def __hash__(self) -> int:
        return hash((type(self.value).__name__, self.value))


@dataclasses.dataclass(eq=False)
class Node:
    kind: str  # "scalar", "mapping", "sequence", "alias"
    line: int  # 1-based, as yaml.v3 reports it
    tag: str = ""  # the explicit tag, short form ("!!str"), "" when none
    value: str = ""  # a scalar's text, an alias's anchor name
    quoted: bool = False  # single/double quoted, literal or folded style
    content: list[Node] = dataclasses.field(default_factory=list)
    alias: Node | None = None

    def target(self) -> Node:
        """The node an alias stands for (compose gives every alias its node), any other node itself."""
        if self.kind == "alias":
            assert self.alias is not None
            return self.alias
        return self

    def indicated_string(self) -> bool:
        return self.kind == "scalar" and (self.tag == STR or (self.tag in ("", "!") and self.quoted))

    def short_tag(self) -> str:
        if self.indicated_string():
            return STR
        if self.tag in ("", "!"):
            if self.kind == "mapping":
                return "!!map"
            if self.kind == "sequence":
                return "!!seq"
            if self.kind == "alias" and self.alias is not None:
                return self.alias.short_tag()
            if self.kind == "scalar":
                return resolve("", self.value)[0]
            return ""
        return self.tag


def _short(tag: str | None) -> str:
    if not tag:
        return ""
    return "!!" + tag[len(_LONG_PREFIX) :] if tag.startswith(_LONG_PREFIX) else tag


# --- composing nodes from PyYAML's events -----------------------------------------------------


def compose(text: str) -> Node | None:
    """The first document's node tree (yaml.v3 decodes only the first), None for an empty stream."""
    anchors: dict[str, Node] = {}
    stack: list[Node] = []
    root: Node | None = None
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.DocumentEndEvent):
            break
        assert event.start_mark is not None  # the parser marks every event it emits
        line = event.start_mark.line + 1
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            node = Node(
                "mapping" if isinstance(event, yaml.MappingStartEvent) else "sequence", line, tag=_short(event.tag)
            )
        elif isinstance(event, yaml.ScalarEvent):
            node = Node(
                "scalar",
                line,
                tag=_short(event.tag),
                value=event.value,
                quoted=(event.style or "") in ("'", '"', "|", ">"),
            )
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in anchors:
                raise YamlError(f"line {line}: unknown anchor '{event.anchor}' referenced")
            if any(open_node is anchors[event.anchor] for open_node in stack):
                raise YamlError(f"anchor '{event.anchor}' value contains itself")
            node = Node("alias", line, value=event.anchor, alias=anchors[event.anchor])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()
            continue
        else:
            continue
        anchor = getattr(event, "anchor", None)
        if anchor and node.kind != "alias":
            anchors[anchor] = node
        if stack:
            stack[-1].content.append(node)
        else:
            root = node
        if node.kind in ("mapping", "sequence"):
            stack.append(node)
    return root


# --- resolving scalars (resolve.go) -----------------------------------------------------------


def _go_int(text: str, base: int = 0) -> int | None:
    """strconv.ParseInt/ParseUint(text, base, 64) without the range check; None when it fails."""
    sign, body = (-1, text[1:]) if text[:1] == "-" else (1, text[1:] if text[:1] == "+" else text)
    if base == 0:
        lower = body[:2].lower()
        if lower in ("0x", "0o", "0b"):
            base, body = {"0x": 16, "0o": 8, "0b": 2}[lower], body[2:]
            # base 0 allows one '_' after the prefix and between digits (Go syntax); yaml.v3 already
            # removed every '_' before parsing.
        elif body[:1] == "0" and len(body) > 1:
            base, body = 8, body[1:]
        else:
            base = 10
    digits = "0123456789abcdef"[:base]
    if not body or any(c not in digits for c in body.lower()):
        return None
    return sign * int(body, base)


def _int_result(number: int | None, *, unsigned_ok: bool = True) -> tuple[str, int] | None:
    if number is None:
        return None
    if -_INT64 <= number < _INT64 or (unsigned_ok and 0 <= number < _UINT64):
        return INT, number
    return None


def _timestamp(text: str) -> Timestamp | None:
    digits = len(text) - len(text.lstrip("0123456789"))
    if digits != 4 or len(text) == 4 or text[4] != "-":
        return None
    patterns = [
        r"(\d{4})-(\d{1,2})-(\d{1,2})[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?(Z|[+-]\d{2}:\d{2})",
        r"(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?()",
        r"(\d{4})-(\d{1,2})-(\d{1,2})()()()()()",
    ]
    for pattern in patterns:
        match = re.fullmatch(pattern, text, flags=re.ASCII)
        if not match:
            continue
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        tz = datetime.UTC
        if zone and zone != "Z":
            hours, minutes = int(zone[1:3]), int(zone[4:6])
            offset = datetime.timedelta(hours=hours, minutes=minutes)
            tz = datetime.timezone(offset if zone[0] == "+" else -offset)
        try:
            moment = datetime.datetime(
                int(year),
                int(month),
                int(day),
                int(hour or 0),
                int(minute or 0),
                int(second or 0),
                int(((fraction or ".0")[1:] + "000000")[:6]),
                tzinfo=tz,
            )
        except ValueError:
            continue
        return Timestamp(moment)
    return None


def resolve(tag: str, text: str) -> tuple[str, Any]:
    """yaml.v3 `resolve`: (resolved tag, value) of a plain scalar with explicit tag `tag` ("" when none)."""
    if tag not in _RESOLVABLE:
        return tag, text
    rtag, out = _resolve(tag, text)
    if tag in ("", rtag, STR, BINARY):
        return rtag, out
    if tag == FLOAT and rtag == INT:
        return FLOAT, float(out)
    raise YamlError(f"cannot decode {rtag} `{text}` as a {tag}")


def _resolve(tag: str, text: str) -> tuple[str, Any]:
    hint = _HINTS.get(text[:1], "N" if text == "" else "")
    if not hint or tag in (STR, BINARY):
        return STR, text
    if text in _MAP_VALUES:
        return _MAP_VALUES[text]
    if hint == ".":
        number = _go_float(text)
        if number is not None:
            return FLOAT, number
    elif hint in "DS":
        if tag in ("", TIMESTAMP):
            moment = _timestamp(text)
            if moment is not None:
                return TIMESTAMP, moment
        plain = text.replace("_", "")
        result = _int_result(_go_int(plain))
        if result:
            return result
        if _YAML_STYLE_FLOAT.fullmatch(plain):
            number = _go_float(plain)
            if number is not None:
                return FLOAT, number
        for prefix, base in (("0b", 2), ("0o", 8)):
            if plain.startswith(prefix):
                result = _int_result(_go_int(plain[2:], base))
                if result:
                    return result
            elif plain.startswith("-" + prefix):
                result = _int_result(_go_int("-" + plain[3:], base), unsigned_ok=False)
                if result:
                    return result
    return STR, text


def _go_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64) for the decimal forms yaml.v3 hands it; out of range is an error."""
    if not re.fullmatch(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?", text, flags=re.ASCII):
        return None
    number = float(text)
    return None if math.isinf(number) else number


# --- decoding into `any` (decode.go) -----------------------------------------------------------


class _Decoder:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.decoded = 0

    def value(self, node: Node) -> Any:
        self.decoded += 1
        if self.decoded > MAX_DECODED:
            # yaml.v3 refuses documents whose aliases expand beyond reason ("billion laughs") too.
            raise YamlError("document contains excessive aliasing")
        if node.kind == "alias":
            return self.value(node.target())
        if node.short_tag() == NULL:
            return None
        if node.kind == "scalar":
            return self.scalar(node)
        if node.kind == "sequence":
            return [self.value(child) for child in node.content]
        return self.mapping(node)

    @staticmethod
    def scalar(node: Node) -> Any:
        if node.indicated_string():
            return node.value
        tag, resolved = resolve(node.tag, node.value)
        if tag == BINARY:
            try:
                return base64.b64decode(resolved, validate=True).decode("utf-8", errors="replace")
            except (binascii.Error, ValueError):
                raise YamlError("!!binary value contains invalid base64 data") from None
        return resolved

    def key(self, node: Node, string_keys: bool) -> Any:
        if string_keys:
            # A key of a map[string]interface{} is decoded into a Go string: the scalar's text as written.
            target = node.target()
            if target.kind != "scalar":
                raise YamlError(f"line {node.line}: cannot unmarshal {target.short_tag()} into a string key")
            return target.value
        key = self.value(node)
        if isinstance(key, (dict, list)):
            raise YamlError(f"invalid map key: {key!r}")
        return key if isinstance(key, str) else TypedKey(key)

    def mapping(self, node: Node, into: dict[str, Any] | None = None, merged: set[str] | None = None) -> dict[str, Any]:
        """decode.go `mapping`; `into` and `merged`: the map a merge key fills and the keys it already has."""
        content = node.content
        before = len(self.errors)
        for i in range(0, len(content), 2):
            for j in range(i + 2, len(content), 2):
                first, again = content[i], content[j]
                if first.kind == again.kind and first.value == again.value:
                    self.errors.append(
                        f"line {again.line}: mapping key {_go_quote(again.value)} already defined at line {first.line}"
                    )
        if len(self.errors) > before:
            return {}
        if into is None:
            string_keys = all(content[i].short_tag() in (STR, MERGE) for i in range(0, len(content), 2))
            out = dict() if string_keys else GeneralMap()
        else:
            # Merged keys are decoded with the key type of the map they go into.
            out, string_keys = into, not isinstance(into, GeneralMap)
        merge_node = None
        own_merged = merged
        for i in range(0, len(content), 2):
            key_node, value_node = content[i], content[i + 1]
            if _is_merge(key_node):
                merge_node = value_node
                continue
            key = self.key(key_node, string_keys)
            if own_merged is not None:
                if key in own_merged:
                    continue
                own_merged.add(key)
            out[key] = self.value(value_node)
        if merge_node is not None:
            self.merge(node, merge_node, out, merged)
        return out

    def merge(self, parent: Node, merge: Node, out: dict[str, Any], merged: set[str] | None) -> None:
        if merged is None:
            merged = {
                self.key(parent.content[i], not isinstance(out, GeneralMap))
                for i in range(0, len(parent.content), 2)
                if not _is_merge(parent.content[i])
            }
        targets = merge.content if merge.kind == "sequence" else [merge]
        for target in targets:
            mapping = target.alias if target.kind == "alias" else target
            if mapping is None or mapping.kind != "mapping":
                raise YamlError("map merge requires map or sequence of maps as the value")
            self.mapping(mapping, into=out, merged=merged)


def _is_merge(node: Node) -> bool:
    return node.kind == "scalar" and node.value == "<<" and not node.quoted and node.tag in ("", "!", MERGE)


def _go_quote(text: str) -> str:
    """Go's %#v of a string (a double-quoted Go literal), for the CLI's wording of a duplicate key."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def load(text: str) -> Any:
    """The first document of `text` as yaml.v3 decodes it into `any`; YamlError (or yaml.YAMLError for the
    syntax) when yaml.v3 refuses it."""
    root = compose(text.removeprefix("\ufeff"))
    if root is None:
        return None
    decoder = _Decoder()
    try:
        value = decoder.value(root)
    except RecursionError:
        raise YamlError("the document nests too deeply") from None
    if decoder.errors:
        raise YamlError("; ".join(decoder.errors))
    return value
