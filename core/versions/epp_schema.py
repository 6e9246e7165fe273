"""What the llm-d EPP and P/D sidecar accept at a given version, as data read from their sources
(core/versions/data/*.json, each with its provenance), and a check as strict as the program itself.

The EPP reads its EndpointPickerConfig in two stages, and the data says how strict each is at that version:
- the document (apiVersion, kind, plugins, schedulingProfiles, ...) is decoded strictly by apimachinery at every
  version: an unknown field is refused (`strict decoding error: unknown field "..."`), names are case-sensitive;
- each plugin's `parameters` go to its factory. v0.7.1 hands them to `json.Unmarshal`: an unknown parameter is
  ignored, a wrong JSON type refused. v0.10.0 hands them to a decoder with DisallowUnknownFields: an unknown
  parameter is refused too (`json: unknown field "..."`). Go matches parameter names case-insensitively.
Types a factory never decodes (`parameters: "ignored"`) accept anything. Plugin references (a profile's
`pluginRef`, the disagg profile handler's `deciders.*`) must name a declared plugin; at v0.7.1 the decider must be
declared before the handler (plugins are created in order), at v0.10.0 anywhere (they are ordered by reference).
From v0.10.0 a plugin may require data another plugin produces; the EPP creates a default producer for most such data,
and refuses a config whose plugin requires data it has none for and no declared plugin produces (`dataKeys`).

`check_epp_config` returns every problem the program would refuse (empty: it would load). The corpus test in
tests/consumers shows it gives the real v0.7.1 EPP's verdict on every config of the corpus.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
from collections.abc import Iterable
from typing import Any

from core import cmdline
from core.versions import Version

DATA = pathlib.Path(__file__).resolve().parent / "data"
GO_TYPES = {
    "integer": "int",
    "number": "float64",
    "boolean": "bool",
    "string": "string",
    "object": "struct",
    "array": "slice",
    "string-list": "[]string",
    "duration": "time.Duration",
}


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing the program refuses: where in the document, and its reason in the program's words."""

    path: str  # e.g. `plugins[0].parameters.blockSizeTokens`
    message: str
    plugin_type: str | None = None
    parameter: str | None = None  # the top-level parameter of that plugin the problem is about

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def data_versions(program: str) -> list[Version]:
    """The versions we hold data for (`epp` or `sidecar`), oldest first."""
    found = (Version.parse(p.stem.split("-v", 1)[1]) for p in DATA.glob(f"{program}-v*.json"))
    return sorted(v for v in found if v is not None)


@functools.cache
def load(program: str, version: Version) -> dict[str, Any]:
    """The data of `program` (`epp`, `sidecar`) at exactly `version`."""
    data: dict[str, Any] = json.loads((DATA / f"{program}-v{version}.json").read_text())
    return data


def data_for(program: str, pinned: Version | None) -> dict[str, Any] | None:
    """The data that describes a pin: same major.minor (a patch release does not change what the config may
    say), None when we hold none for that line (the check then says nothing; the feature facts still apply)."""
    if pinned is None:
        return None
    for version in reversed(data_versions(program)):
        if (version.major, version.minor) == (pinned.major, pinned.minor):
            return load(program, version)
    return None


# --- JSON values against Go types ------------------------------------------------------------


def _json_kind(value: Any) -> str:
    """The JSON kind of a value as Go's decoder names it in its errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "null"


def _fits(kind: str, value: Any) -> bool:
    if value is None:  # Go's decoder leaves the field as it was on null
        return True
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return True  # "any"


def _spec(field: Any) -> dict[str, Any]:
    return field if isinstance(field, dict) else {"type": field}


def _match(fields: dict[str, Any], name: str, case_insensitive: bool) -> str | None:
    if name in fields:
        return name
    if case_insensitive:
        for known in fields:
            if known.lower() == name.lower():
                return known
    return None


def _check_object(
    value: Any, fields: dict[str, Any], path: str, rules: dict[str, Any], messages: dict[str, Any]
) -> list[str]:
    """Problems of one decoded object (parameters or a nested struct of them), as `path: message` pairs."""
    if not isinstance(value, dict):
        if value is None:
            return []
        return [f"{path}: " + messages["wrongType"].format(got=_json_kind(value), field=path, want="struct")]
    found = []
    case_insensitive = rules.get("fieldNames") == "case-insensitive"
    for name, item in value.items():
        known = _match(fields, name, case_insensitive)
        where = f"{path}.{name}"
        if known is None:
            if rules.get("unknownFields") == "refused":
                found.append(f"{where}: " + messages["unknownParameter"].format(field=name))
            continue
        spec = _spec(fields[known])
        if not _fits(spec["type"], item):
            found.append(
                f"{where}: "
                + messages["wrongType"].format(
                    got=_json_kind(item), field=known, want=GO_TYPES.get(spec["type"], spec["type"])
                )
            )
        elif spec["type"] == "object" and "fields" in spec:
            found += _check_object(item, spec["fields"], where, rules, messages)
        elif "enum" in spec and item is not None and item not in spec["enum"]:
            found.append(f"{where}: {known} {item!r} is not one of {', '.join(repr(e) for e in spec['enum'] if e)}")
        elif "minimum" in spec and item is not None and item < spec["minimum"]:
            found.append(f"{where}: {known} parameter cannot be less than {spec['minimum']} (it is {item})")
    return found


def _parameter_problems(plugin_type: str, params: Any, path: str, data: dict[str, Any]) -> list[Problem]:
    described = data["pluginTypes"].get(plugin_type)
    if described is None or described.get("parameters") == "ignored":
        return []  # not decoded by its factory (or not described: see docs/consumers-router.md)
    rules, messages = data["parameters"], data["messages"]
    variants = described.get("variants") or [described["parameters"]]
    attempts = [_check_object(params, fields, path, rules, messages) for fields in variants]
    best = min(attempts, key=len)
    if not best:
        return []
    if len(variants) > 1:  # the program tries each schema and reports both when neither fits
        best = [
            f"{path}: fits neither the nested nor the flat parameter format: "
            + "; ".join(text.split(": ", 1)[1] for attempt in attempts for text in attempt)
        ]
    problems = []
    for text in best:
        where, message = text.split(": ", 1)
        rest = where[len(path) + 1 :] if where.startswith(path + ".") else ""
        problems.append(Problem(where, message, plugin_type, rest.split(".", 1)[0] or None))
    return problems


def _reference(params: Any, dotted: str) -> str | None:
    node = params
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, str) and node else None


# --- the EndpointPickerConfig -----------------------------------------------------------------


def check_epp_config(config: Any, data: dict[str, Any]) -> list[Problem]:
    """Every problem the EPP described by `data` would refuse in this EndpointPickerConfig; [] when it loads."""
    messages, document = data["messages"], data["document"]
    if not isinstance(config, dict):
        return [Problem("", f"the EndpointPickerConfig is a {_json_kind(config)}, not an object")]
    api = config.get("apiVersion")
    if api not in data["apiVersions"] or config.get("kind") != data["kind"]:
        shown = f'no kind "{config.get("kind")}" is registered for version "{api}"'
        return [Problem("apiVersion", shown + f" (this EPP reads {data['kind']} of {', '.join(data['apiVersions'])})")]
    problems = [
        Problem(name, messages["unknownField"].format(field=name)) for name in config if name not in document["fields"]
    ]
    problems += [
        Problem(
            name,
            messages["wrongType"].format(got=_json_kind(value), field=name, want=GO_TYPES[document["fields"][name]]),
        )
        for name, value in config.items()
        if name in document["fields"] and not _fits(document["fields"][name], value)
    ]
    if problems:
        return problems  # decoding stops the program before any plugin is looked at
    plugins = config.get("plugins") or []
    return _plugin_problems(plugins, data) + _profile_problems(config, data) + _data_key_problems(plugins, data)


def _plugin_problems(plugins: list[Any], data: dict[str, Any]) -> list[Problem]:
    messages, document = data["messages"], data["document"]
    problems: list[Problem] = []
    declared: list[str] = []
    registered = set(data["registeredTypes"])
    for index, plugin in enumerate(plugins):
        path = f"plugins[{index}]"
        if not isinstance(plugin, dict):
            problems.append(
                Problem(path, messages["wrongType"].format(got=_json_kind(plugin), field="plugins", want="struct"))
            )
            continue
        problems += [
            Problem(f"{path}.{name}", messages["unknownField"].format(field=name))
            for name in plugin
            if name not in document["plugin"]
        ]
        plugin_type = plugin.get("type")
        name = str(plugin.get("name") or plugin_type or "")
        if not plugin_type:
            problems.append(Problem(path, f"plugin '{name}' is missing a type"))
            continue
        if name in declared:
            problems.append(Problem(f"{path}.name", f"duplicate plugin name '{name}'"))
        if plugin_type not in registered:
            problems.append(Problem(f"{path}.type", messages["unknownType"].format(type=plugin_type), plugin_type))
            declared.append(name)
            continue
        params = plugin.get("parameters")
        problems += _parameter_problems(plugin_type, params, f"{path}.parameters", data)
        problems += _reference_problems(plugin_type, params, f"{path}.parameters", declared, plugins, data)
        declared.append(name)
    return problems


def _reference_problems(
    plugin_type: str, params: Any, path: str, declared: list[str], plugins: list[Any], data: dict[str, Any]
) -> list[Problem]:
    described = data["pluginTypes"].get(plugin_type) or {}
    every = {str(p.get("name") or p.get("type")) for p in plugins if isinstance(p, dict)}
    problems = []
    for dotted in described.get("references", []):
        ref = _reference(params, dotted)
        if ref is None:
            continue
        known = declared if data["references"]["order"] == "declared-before" else every
        if ref not in known:
            message = data["messages"]["undefinedReference"].format(field=dotted, ref=ref)
            if ref in every:
                message += " (it is declared after this plugin, and this EPP creates plugins in order)"
            problems.append(Problem(f"{path}.{dotted}", message, plugin_type, dotted.split(".", 1)[0]))
    return problems


def _data_key_problems(plugins: list[Any], data: dict[str, Any]) -> list[Problem]:
    """A plugin that requires a data key no declared plugin produces, of a key the EPP has no default producer for
    (`dataKeys`; an EPP without data dependencies, v0.7.1, has none). A key is named for its producer: the plugin's
    name, which a consumer names in a parameter of its own, else the producer's type."""
    declared = [(i, p) for i, p in enumerate(plugins) if isinstance(p, dict) and p.get("type")]
    problems = []
    for key, spec in (data.get("dataKeys") or {}).get("withoutDefaultProducer", {}).items():
        produced = {str(p.get("name") or p["type"]) for _, p in declared if p["type"] == spec["producedBy"]}
        for index, plugin in declared:
            if (name_parameter := spec["consumedBy"].get(plugin["type"])) is None:
                continue
            params: dict[str, Any] = plugin["parameters"] if isinstance(plugin.get("parameters"), dict) else {}
            producer = str(params.get(name_parameter) or spec["producedBy"])
            if producer not in produced:
                consumer = str(plugin.get("name") or plugin["type"])
                message = data["messages"]["noDefaultProducer"].format(key=f"{key}/{producer}", consumer=consumer)
                problems.append(Problem(f"plugins[{index}]", message, plugin["type"]))
    return problems


def _profile_problems(config: dict[str, Any], data: dict[str, Any]) -> list[Problem]:
    messages, document = data["messages"], data["document"]
    declared = {str(p.get("name") or p.get("type")) for p in config.get("plugins") or [] if isinstance(p, dict)}
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, profile in enumerate(config.get("schedulingProfiles") or []):
        path = f"schedulingProfiles[{index}]"
        if not isinstance(profile, dict):
            problems.append(
                Problem(
                    path,
                    messages["wrongType"].format(got=_json_kind(profile), field="schedulingProfiles", want="struct"),
                )
            )
            continue
        problems += [
            Problem(f"{path}.{name}", messages["unknownField"].format(field=name))
            for name in profile
            if name not in document["profile"]
        ]
        name = profile.get("name")
        if not name:
            problems.append(Problem(path, f"schedulingProfiles[{index}] is missing a name"))
        elif name in seen:
            problems.append(Problem(f"{path}.name", f"schedulingProfiles[{index}] has duplicate name '{name}'"))
        seen.add(str(name))
        for position, entry in enumerate(profile.get("plugins") or []):
            where = f"{path}.plugins[{position}]"
            if not isinstance(entry, dict):
                problems.append(
                    Problem(where, messages["wrongType"].format(got=_json_kind(entry), field="plugins", want="struct"))
                )
                continue
            problems += [
                Problem(f"{where}.{key}", messages["unknownField"].format(field=key))
                for key in entry
                if key not in document["profilePlugin"]
            ]
            problems += [
                Problem(
                    f"{where}.{key}",
                    messages["wrongType"].format(got=_json_kind(entry[key]), field=key, want=GO_TYPES[kind]),
                )
                for key, kind in document["profilePlugin"].items()
                if key in entry and not _fits(kind, entry[key])
            ]
            ref = entry.get("pluginRef")
            if not ref:
                problems.append(
                    Problem(where, f"schedulingProfiles[{name}].plugins[{position}] is missing a 'pluginRef'")
                )
            elif ref not in declared:
                problems.append(
                    Problem(f"{where}.pluginRef", messages["undefinedProfilePlugin"].format(profile=name, ref=ref))
                )
    return problems


# --- plugin stability -------------------------------------------------------------------------


def experimental_flag(data: dict[str, Any]) -> str | None:
    """The EPP flag without which it refuses to start with an Alpha plugin; None for an EPP without stability levels
    (v0.7.1)."""
    experimental = data.get("experimentalTypes")
    return str(experimental["flag"]) if experimental else None


def experimental_problems(config: Any, data: dict[str, Any], args: Iterable[str]) -> list[Problem]:
    """Each plugin of `config` whose type the EPP of `data` registers as Alpha, when its command line `args` does not
    set the flag that allows them: it exits at start (ValidatePluginStability)."""
    flag = experimental_flag(data)
    if flag is None or not isinstance(config, dict):
        return []
    if cmdline.go_flag_on(cmdline.parse_flags(args, boolean=frozenset({flag})), flag):
        return []
    alpha, message = set(data["experimentalTypes"]["types"]), data["experimentalTypes"]["message"]
    return [
        Problem(
            f"plugins[{index}].type", message.format(name=plugin.get("name") or plugin["type"], type=plugin["type"])
        )
        for index, plugin in enumerate(config.get("plugins") or [])
        if isinstance(plugin, dict) and plugin.get("type") in alpha
    ]


# --- the sidecar's flags ----------------------------------------------------------------------


def check_sidecar_args(args: Iterable[str], data: dict[str, Any]) -> list[Problem]:
    """Every flag of `args` the sidecar described by `data` would refuse: unknown, or a value of the wrong type."""
    flags, problems = data["flags"], []
    tokens = list(args)
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("-"):
            continue
        name, has_value, value = token.lstrip("-").partition("=")
        kind = flags.get(name)
        if kind is None:
            problems.append(Problem(f"--{name}", data["unknownFlag"].format(flag=name)))
            continue
        if not has_value and kind != "boolean":
            value = tokens[index] if index < len(tokens) else ""
            index += 1
        problem = _flag_value_problem(name, kind, value if (has_value or kind != "boolean") else "true", data)
        if problem:
            problems.append(Problem(f"--{name}", problem))
    return problems


def _flag_value_problem(name: str, kind: str, value: str, data: dict[str, Any]) -> str | None:
    if kind == "integer" and not value.lstrip("-").isdigit():
        return f'invalid argument "{value}" for "--{name}" flag: parse error'
    if kind == "boolean" and value.lower() not in ("1", "0", "t", "f", "true", "false"):
        return f'invalid argument "{value}" for "--{name}" flag: parse error'
    if name == "kv-connector" and value not in data.get("kvConnectors", [value]):
        return f"--kv-connector {value!r} is not one of {', '.join(data['kvConnectors'])}"
    return None
