"""Read `Pulumi.<stack>.yaml` the way the Pulumi CLI reads it and the engine passes it to the program.

`read_config(path)` gives the `namespace:key` -> text map a program receives for that stack file: the file
decoded as the CLI 3.274.1 decodes it (`core.goyaml`: yaml.v3 typing, a key defined twice refused with its
lines), keys without a namespace put in the project's, values turned into text as the CLI's `config.Value`
does (objects as JSON), and the `config:` values of Pulumi.yaml added where the stack sets none.
`program_config(explicit, environ)` is the one function that turns that map and the process environment
into what `pulumi.Config` resolves (`PULUMI_CONFIG_<KEY>`, then `PULUMI_CONFIG`): the program
(stacks/program.py) and the offline tools (`check`, `render`, `plan`) both call it.

Whatever the file holds, reading it either succeeds or raises `StackFileError` with one line that
names the file and what is wrong with it: no traceback reaches a user for a malformed stack file.
"""

from __future__ import annotations

import decimal
import json
import math
import os
import pathlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml

from core import goyaml
from core.keys import NAMESPACE, SECRET_KEYS, plain_secret_keys

if TYPE_CHECKING:
    from core.config import StackConfig

# core.config (the pydantic schema) and core.gate are imported by the functions that need them: reading a
# stack file and its secrets provider (`python -m stacks secrets`, before every preview and up) needs neither.

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
# Stands in for secret values offline: the tools never decrypt anything.
SECRET_PLACEHOLDER = "[secret]"


class StackFileError(ValueError):
    """A stack file that cannot be read as Pulumi stack configuration."""


def stack_file(stack: str) -> pathlib.Path:
    return PROJECT_ROOT / f"Pulumi.{stack}.yaml"


def available_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in PROJECT_ROOT.glob("Pulumi.*.yaml"))


def go_json_float(number: float) -> str:
    """A float as Go's encoding/json writes it: shortest digits, the 'e' form below 1e-6 and from 1e21
    (`1e+21`, `1e-7`); NaN and infinities are refused as json.Marshal refuses them."""
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"json: unsupported value: {number}")
    if number == 0:
        return "-0" if math.copysign(1.0, number) < 0 else "0"
    exact = decimal.Decimal(repr(number)).normalize()
    if abs(number) < 1e-6 or abs(number) >= 1e21:
        sign, digits, exponent = exact.as_tuple()
        assert isinstance(exponent, int)  # a finite number's (NaN and infinities were refused above)
        text = "".join(map(str, digits))
        power = exponent + len(text) - 1
        mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}".replace("e-0", "e-")
    return format(exact, "f")


def _second_pass(number: float) -> float:
    """LoadProjectStackBytes writes the decoded file back to YAML and decodes it again: a float that Go
    prints as an integer is then an integer, which changes only -0.0 (printed `-0`, read back as 0)."""
    return 0.0 if number == 0 else number


def _go_key(key: Any) -> str:
    """fmt.Sprintf("%v", key) of a non-string map key, as Pulumi names it."""
    if isinstance(key, goyaml.TypedKey):
        key = key.value
    if key is None:
        return "<nil>"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        return go_json_float(key)
    if isinstance(key, goyaml.Timestamp):
        return key.go_string()
    return str(key)


def _plain(value: Any) -> Any:
    """A decoded value as the CLI stores it in an object (timestamps as Go prints them, keys as text)."""
    if isinstance(value, dict):
        return {(k if isinstance(k, str) else _go_key(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, goyaml.Timestamp):
        return value.go_string()
    if isinstance(value, float):
        # What the program parses from Go's JSON: 1.0 is written `1` (an int), NaN and infinities refused.
        return json.loads(go_json_float(_second_pass(value)))
    if isinstance(value, int) and not isinstance(value, bool) and value >= 2**63:
        # An object is kept as JSON and read back with json.Number: Int64() fails above int64, Float64() wins.
        return json.loads(go_json_float(float(value)))
    return value


def _as_text(value: Any) -> str:
    """config.Value's text: strings as they are, scalars as JSON, objects as compact JSON (the CLI's
    `object.MarshalString`); an empty value is the empty string."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, goyaml.Timestamp):
        return value.go_string()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_json_float(_second_pass(value))
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _text(path: pathlib.Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StackFileError(f"{path}: no such stack file (stacks here: {', '.join(available_stacks())})") from None
    except UnicodeDecodeError as error:
        raise StackFileError(f"{path}: not a UTF-8 text file (byte {error.start}); a stack file is YAML") from None
    except OSError as error:
        raise StackFileError(f"{path}: cannot be read ({error.strerror})") from None


def _document(path: pathlib.Path) -> Any:
    """The file decoded as the CLI decodes it (yaml.v3 into `any`)."""
    try:
        return goyaml.load(_text(path))
    except goyaml.YamlError as error:
        raise StackFileError(f"{path}: {error} (the Pulumi CLI refuses this file too)") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise StackFileError(f"{path}: {where}YAML syntax error: {problem}") from None


def parse_key(path: pathlib.Path, key: str) -> str:
    """config.ParseKey: `namespace:name`, or the old `namespace:config:name`."""
    parts = key.split(":")
    if len(parts) == 2:
        return key
    if len(parts) == 3 and parts[1] == "config" and all(parts):
        return f"{parts[0]}:{parts[2]}"
    raise StackFileError(
        f"{path}: could not parse {key} as a configuration key (configuration keys should be of "
        f"the form `<namespace>:<name>`)"
    )


def project_name(root: pathlib.Path = PROJECT_ROOT) -> str:
    document = goyaml.load((root / "Pulumi.yaml").read_text(encoding="utf-8")) or {}
    return str(document.get("name", ""))


def _config_map(path: pathlib.Path, document: Any, project: str) -> tuple[dict[str, str], list[str]]:
    """The `config:` map of a decoded stack file, as LoadProjectStackBytes turns it into config.Map."""
    if document is None:
        return {}, []
    if not isinstance(document, dict) or (
        isinstance(document, goyaml.GeneralMap) and not all(isinstance(k, str) for k in document)
    ):
        raise StackFileError(f"{path}: expected a mapping with a `config:` key, got a YAML {type(document).__name__}")
    if document.get("environment"):
        raise StackFileError(
            f"{path}: `environment:` imports Pulumi ESC environments, whose values only the "
            f"Pulumi service can resolve; the offline tools would judge other values than the "
            f"program gets. Put the values in `config:`."
        )
    config = document.get("config")
    if config is None:
        return {}, []
    if not isinstance(config, dict):
        raise StackFileError(
            f"{path}: `config:` must be a mapping of `namespace:key: value`, got a YAML {type(config).__name__}"
        )
    if isinstance(config, goyaml.GeneralMap):
        # Not namespaced by the CLI either; a key that is not a string never parses as `namespace:name`.
        odd = next(k for k in config if not isinstance(k, str))
        parse_key(path, _go_key(odd))
    values: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in config.items():
        full = parse_key(path, key if ":" in key else f"{project}:{key}")
        if isinstance(value, dict) and list(value) == ["secure"] and isinstance(value["secure"], str):
            values[full] = SECRET_PLACEHOLDER
            secrets.append(full)
            continue
        try:
            values[full] = _as_text(value)
        except ValueError as error:
            raise StackFileError(f"{path}: {full}: {error} (the Pulumi CLI cannot store this value)") from None
    return values, secrets


def _project_config(root: pathlib.Path, project: str) -> dict[str, str]:
    """The values Pulumi.yaml's `config:` gives keys (a `value:`, or a `default:`/bare value of a key of the
    project's own namespace): the engine passes them where the stack file sets nothing."""
    path = root / "Pulumi.yaml"
    document = _document(path) or {}
    config = document.get("config") if isinstance(document, dict) else None
    values: dict[str, str] = {}
    for key, spec in (config or {}).items():
        full = key if ":" in str(key) else f"{project}:{key}"
        if isinstance(spec, dict) and "value" in spec:
            values[full] = _as_text(spec["value"])
        elif isinstance(spec, dict) and "default" in spec:
            values[full] = _as_text(spec["default"])
        elif not isinstance(spec, dict):
            values[full] = _as_text(spec)
    return values


def read_config(path: pathlib.Path, root: pathlib.Path = PROJECT_ROOT) -> tuple[dict[str, str], list[str]]:
    """(config map, secret keys) the engine passes for this stack file; `secure:` values become
    SECRET_PLACEHOLDER."""
    project = project_name(root)
    values, secrets = _config_map(path, _document(path), project)
    merged = {**_project_config(root, project), **values}
    return merged, secrets


def _env_key(key: str) -> str:
    """pulumi.runtime.config.get_config_env_key: `rebel100:decode` -> PULUMI_CONFIG_REBEL100_DECODE."""
    return "PULUMI_CONFIG_" + "".join(
        c.upper() if c.isascii() and c.isalnum() else ("_" if c != "_" else c) for c in key
    )


def namespace_keys() -> list[str]:
    """Every key of the `rebel100:` namespace a program reads."""
    from core.config import StackConfig

    return [f"{NAMESPACE}:{info.alias or name}" for name, info in StackConfig.model_fields.items()] + [
        f"{NAMESPACE}:{name}" for name in SECRET_KEYS
    ]


def program_config(explicit: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The config a Pulumi Python program sees, resolved key by key as pulumi.runtime.config.get_config does:
    the engine's (`explicit`) first, then `PULUMI_CONFIG_<KEY>`, then the JSON bag `PULUMI_CONFIG`. The
    program and the offline tools both call this, so they judge and build from the same values."""
    environ = os.environ if environ is None else environ
    try:
        bag = json.loads(environ.get("PULUMI_CONFIG", "{}"))
    except json.JSONDecodeError:
        bag = {}
    merged: dict[str, Any] = dict(bag) if isinstance(bag, dict) else {}
    for key in namespace_keys():
        if _env_key(key) in environ:
            merged[key] = environ[_env_key(key)]
    merged.update(explicit)
    return merged


def secrets_provider(path: pathlib.Path) -> str | None:
    """The stack file's `secretsprovider:` (e.g. `awskms://...`), None when it names none (the backend's default)."""
    document = _document(path)
    value = document.get("secretsprovider") if isinstance(document, dict) else None
    return str(value) if value else None


def environment(config: dict[str, str]) -> str:
    """`rebel100:environment` of a read stack file, with the schema's default (prod) when unset."""
    if config.get(f"{NAMESPACE}:environment"):
        return config[f"{NAMESPACE}:environment"]
    from core.config import StackConfig

    default: str = StackConfig.model_fields["environment"].default
    return default


def load_stack(path: pathlib.Path, name: str) -> StackConfig:
    """Read and check one stack file: StackFileError or ConfigError, else the typed config."""
    from core.gate import load_config

    config, secure = read_config(path)
    return load_config(
        program_config(config),
        source=f"stack {name!r}",
        plain_secrets=plain_secret_keys(config, set(secure).__contains__),
    )
