"""`python -m stacks validate PATH...`: the project's strict validator of rendered Kubernetes manifests.

PATH is a YAML file (multi-document allowed, `kind: List` expanded) or a folder searched for
*.yaml / *.yml. Built-in kinds are checked with kubernetes-validate in strict mode against the
schemas of `--k8s-version` (default 1.34.0; the library bundles 1.25 to 1.37): an unknown field is an
error. Custom resources are checked against the openAPIV3Schema of the CRDs vendored in `crds/`
(see crds/README.md for their versions and origin), the way the API server treats them: schema
defaults are applied first, then a field the server would prune is an error, not silently dropped.
A kind with no schema at all is reported 'unchecked' and does not fail the run.

Exit status: 0 every checked document valid, 1 some invalid, 2 usage or setup error (no manifests,
an unsupported Kubernetes version).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import pathlib
import re
import sys
from collections.abc import Iterator
from typing import Any

import yaml

from core.stackfile import PROJECT_ROOT

# jsonschema and kubernetes-validate are imported inside the functions that use them: every command of
# `python -m stacks` builds its parser with `add_arguments` below, and only `validate` needs them.

CRD_DIR = PROJECT_ROOT / "crds"
DEFAULT_K8S_VERSION = "1.34.0"
OK, INVALID, UNCHECKED = "ok", "invalid", "unchecked"


# --- CRD schemas ---------------------------------------------------------------------------


def strict(schema: dict) -> dict:
    """Copy of a CRD schema in which unknown properties are rejected instead of pruned, and OpenAPI's
    `nullable` is spelt as JSON Schema understands it."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        if (
            node.get("type") == "object"
            and "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        if node.get("nullable") is True and isinstance(node.get("type"), str):
            node["type"] = [node["type"], "null"]
        for value in node.values():
            walk(value)

    walk(schema)
    # apiVersion and kind are always allowed at the root; metadata is validated by the API server
    # itself (ObjectMeta), not by the CRD schema, and is left out of the body that is checked
    root = schema.setdefault("properties", {})
    root.pop("metadata", None)
    for key in ("apiVersion", "kind"):
        root.setdefault(key, {"type": "string"})
    return schema


def apply_defaults(schema: Any, value: Any) -> Any:
    """Fill in schema defaults the way the API server does before it validates a custom resource:
    a missing property with a `default` gets it, inside objects that are present (recursively,
    through array items and additionalProperties)."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, sub in properties.items():
            if key not in value and isinstance(sub, dict) and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = apply_defaults(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                if key not in properties:
                    value[key] = apply_defaults(extra, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


def load_crds(folder: pathlib.Path = CRD_DIR) -> dict[tuple[str, str], dict]:
    """{(apiVersion, kind): strict schema} of every served version of every CRD in `folder`."""
    schemas = {}
    for path in sorted(pathlib.Path(folder).glob("*.y*ml")):
        # libyaml when the wheel has it: the vendored CRDs are large, the pure-Python parser takes seconds.
        for doc in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if not version.get("served", True):
                    continue
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                if schema:
                    schemas[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = strict(schema)
    return schemas


# --- documents -----------------------------------------------------------------------------


def yaml_files(paths: list[pathlib.Path]) -> list[pathlib.Path]:
    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        else:
            files.append(path)
    return files


def documents(paths: list[pathlib.Path]) -> Iterator[tuple[pathlib.Path, Any, str | None]]:
    """(file, object, problem) for every object of every file; problem set when the file is not YAML."""
    for file in yaml_files(paths):
        try:
            docs = list(yaml.safe_load_all(file.read_text()))
        except (OSError, yaml.YAMLError) as exc:
            yield file, None, f"not valid YAML: {exc}"
            continue
        for doc in docs:
            if doc is None:
                continue
            if isinstance(doc, dict) and doc.get("kind") == "List":
                for item in doc.get("items") or []:
                    yield file, item, None
            else:
                yield file, doc, None


# --- validation ----------------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    file: pathlib.Path
    name: str  # "Kind name (apiVersion)"
    status: str  # OK, INVALID or UNCHECKED
    errors: list[str]  # "dotted.path: message"

    def lines(self) -> list[str]:
        if self.status == OK:
            return [f"ok {self.file}: {self.name}"]
        if self.status == UNCHECKED:
            return [f"UNCHECKED {self.file}: {self.name}: no schema for this kind"]
        return [f"INVALID {self.file}: {self.name}: {error}" for error in self.errors]


def _path(parts) -> str:
    return ".".join(str(p) for p in parts) or "<root>"


def bundled_versions() -> list[str]:
    """The Kubernetes minor versions whose schemas kubernetes-validate bundles (1.25 ... 1.37 in 1.37.0)."""
    from kubernetes_validate import utils as kv_utils

    return sorted(
        {kv_utils.major_minor(v) for v in kv_utils.all_versions()}, key=lambda v: tuple(map(int, v.split(".")))
    )


def supported(k8s_version: str) -> bool:
    from kubernetes_validate import utils as kv_utils

    return kv_utils.major_minor(k8s_version.removeprefix("v")) in bundled_versions()


@functools.cache
def _builtin_validator(api_version: str, kind: str, k8s_version: str) -> Any | None:
    """kubernetes-validate's strict schema of one built-in kind, as its `validate` builds it, or None when it has
    none. Built once per kind: the library's own `validate` parses its multi-megabyte `_definitions.json` again
    for every object, which was most of what `check` spent validating a render."""
    import jsonschema
    from kubernetes_validate import utils as kv_utils
    from referencing import Registry, Resource

    wanted = kv_utils.major_minor(k8s_version.removeprefix("v"))
    version = [v for v in kv_utils.all_versions() if kv_utils.major_minor(v) <= wanted][-1]
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kv_utils.schema_contents(f"{folder}/{kind.lower()}-{group_version}.json", k8s_version)
    except FileNotFoundError:
        return None
    registry = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(_builtin_definitions(folder, k8s_version)) @ registry
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@functools.cache
def _builtin_definitions(folder: str, k8s_version: str) -> dict:
    from kubernetes_validate import utils as kv_utils

    return kv_utils.schema_contents(f"{folder}/_definitions.json", k8s_version)


def validate_object(doc: dict, crds: dict, k8s_version: str = DEFAULT_K8S_VERSION) -> tuple[str, list[str]]:
    """(status, errors) of one object; `k8s_version` must be `supported`."""
    import jsonschema

    key = (doc["apiVersion"], doc["kind"])
    if key in crds:
        body = apply_defaults(crds[key], copy.deepcopy({k: v for k, v in doc.items() if k != "metadata"}))
        errors = [
            f"{_path(e.absolute_path)}: {e.message}"
            for e in sorted(
                jsonschema.Draft7Validator(crds[key]).iter_errors(body), key=lambda e: list(map(str, e.absolute_path))
            )
        ]
        return (INVALID if errors else OK), errors
    validator = _builtin_validator(doc["apiVersion"], doc["kind"], k8s_version)
    if validator is None:
        return UNCHECKED, []
    # The first error only, as kubernetes_validate.validate raises it.
    error = next(iter(validator.iter_errors(doc)), None)
    if error is not None:
        return INVALID, [f"{_path(error.path)}: {error.message}"]
    return OK, []


# --- verdicts of earlier runs ----------------------------------------------------------------
# `check` validates its whole render on every run: jsonschema, the vendored CRDs (840 KB of YAML) and
# kubernetes-validate's definitions took more of a `check` than the rest of the project's own code. The
# validator is a pure function of the object and the validator itself, so an object it found valid once
# is valid again: `valid_before` remembers the sha256 of each valid object under a key that names the
# validator (this file, the CRDs, the Kubernetes version, the versions of jsonschema, referencing and
# kubernetes-validate). An object changed by one byte, or any change of the validator, is validated
# afresh; invalid objects are never remembered (their errors are printed from a real run). The cache
# lives in ${XDG_CACHE_HOME:-~/.cache}/rebel100-stack/validated; REBEL100_VALIDATE_CACHE=0 turns it off.


def _cache_dir(k8s_version: str, crd_dir: pathlib.Path) -> pathlib.Path | None:
    import hashlib
    import os
    from importlib import metadata

    if os.environ.get("REBEL100_VALIDATE_CACHE", "1") == "0":
        return None
    key = hashlib.sha256()
    key.update(pathlib.Path(__file__).read_bytes())
    key.update(k8s_version.encode())
    for path in sorted(pathlib.Path(crd_dir).glob("*.y*ml")):
        key.update(path.name.encode() + b"\0" + path.read_bytes())
    for dist in ("jsonschema", "referencing", "kubernetes-validate", "pyyaml"):
        try:
            key.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            return None
    root = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    return root / "rebel100-stack" / "validated" / key.hexdigest()[:32]


def _object_key(doc: dict) -> str | None:
    """sha256 of the object as canonical JSON; None (never cached) for an object JSON cannot spell exactly."""
    import hashlib
    import json

    try:
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def problems_of(
    manifests: list[dict], k8s_version: str = DEFAULT_K8S_VERSION, crd_dir: pathlib.Path = CRD_DIR
) -> list[str]:
    """`Kind name: error` for every error of the strict validator in `manifests` (what `check` refuses);
    objects valid in an earlier run (same object, same validator) are not validated again."""
    cache = _cache_dir(k8s_version, crd_dir)
    keys = [_object_key(m) for m in manifests] if cache else [None] * len(manifests)
    todo = [
        (m, k) for m, k in zip(manifests, keys, strict=True) if k is None or cache is None or not (cache / k).exists()
    ]
    if not todo:
        return []
    crds = load_crds(crd_dir)
    problems = []
    for manifest, key in todo:
        status, errors = validate_object(manifest, crds, k8s_version)
        name = f"{manifest.get('kind')} {(manifest.get('metadata') or {}).get('name', '?')}"
        problems += [f"{name}: {error}" for error in errors if status == INVALID]
        if cache is not None and key is not None and status != INVALID:
            try:
                cache.mkdir(parents=True, exist_ok=True)
                (cache / key).touch()
            except OSError:
                pass  # a read-only or full cache only costs the next run its validation
    return problems


def validate_paths(
    paths: list[pathlib.Path], k8s_version: str = DEFAULT_K8S_VERSION, crd_dir: pathlib.Path = CRD_DIR
) -> list[Result]:
    crds = load_crds(crd_dir)
    results = []
    for file, doc, problem in documents(paths):
        if problem:
            results.append(Result(file, "?", INVALID, [problem]))
            continue
        if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
            results.append(Result(file, "?", INVALID, ["a document without apiVersion and kind"]))
            continue
        name = f"{doc['kind']} {(doc.get('metadata') or {}).get('name', '?')} ({doc['apiVersion']})"
        status, errors = validate_object(doc, crds, k8s_version)
        results.append(Result(file, name, status, errors))
    return results


def summary(results: list[Result]) -> str:
    counts = {status: sum(r.status == status for r in results) for status in (OK, INVALID, UNCHECKED)}
    return f"{len(results)} documents: {counts[OK]} valid, {counts[INVALID]} invalid, {counts[UNCHECKED]} unchecked"


def add_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("paths", nargs="+", metavar="PATH", help="YAML file or folder of them")
    cmd.add_argument(
        "--k8s-version",
        default=DEFAULT_K8S_VERSION,
        help=f"Kubernetes schemas of this version for built-in kinds (default {DEFAULT_K8S_VERSION})",
    )
    cmd.add_argument("--crds", default=str(CRD_DIR), help="folder of CustomResourceDefinitions (default crds/)")
    cmd.add_argument("--quiet", action="store_true", help="print only problems and the summary")


def run(args) -> int:
    paths = [pathlib.Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not supported(args.k8s_version):
        import kubernetes_validate

        print(
            f"error: kubernetes-validate {kubernetes_validate.__version__} has no schemas for Kubernetes "
            f"{args.k8s_version} (it has {', '.join(bundled_versions())})",
            file=sys.stderr,
        )
        return 2
    results = validate_paths(paths, args.k8s_version, pathlib.Path(args.crds))
    for result in results:
        if not (args.quiet and result.status == OK):
            print("\n".join(result.lines()))
    print(summary(results))
    if not results:
        print("error: no manifests found", file=sys.stderr)
        return 2
    return 1 if any(r.status == INVALID for r in results) else 0


def main(argv=None) -> int:
    top = argparse.ArgumentParser(prog="python -m stacks.validate", description=__doc__.splitlines()[0])
    add_arguments(top)
    return run(top.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
