"""Offline render: the objects of a stack file, worked out by `objects.stack` without starting Pulumi.

They are the manifests the program's components register (`tests/stacks/test_render_equivalence.py`
runs the real program under Pulumi's mock runtime, `stacks/mocks.py`, and compares). The files are
named as the Kubernetes provider's renderYamlToDirectory names them
(`1-manifest/<apiVersion>-<kind>-<namespace>-<name>.yaml`), so a render of `python -m stacks
render` and of `pulumi up` can be compared file by file.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import tempfile
from typing import Any

import yaml

from core.config import NAMESPACE, StackConfig
from core.gate import load_config, warnings_for
from core.keys import plain_secret_keys
from core.stackfile import SECRET_PLACEHOLDER, program_config, read_config
from objects.stack import hf_token_withheld, stack_objects


@dataclasses.dataclass
class Rendered:
    manifests: list[dict]
    outputs: dict[str, Any]
    warnings: list[str] = dataclasses.field(default_factory=list)  # what the program logs as warnings


def render_config(config: dict[str, str], secret_keys: list[str], stack: str) -> Rendered:
    """The objects and outputs of a stack's config map, as the program registers and exports them; the
    config gate runs first (ConfigError), as under the engine."""
    cfg = load_config(
        program_config(config),
        source=f"stack {stack!r}",
        plain_secrets=plain_secret_keys(config, set(secret_keys).__contains__),
    )
    warnings = [str(advice) for advice in warnings_for(cfg)]
    token = SECRET_PLACEHOLDER if f"{NAMESPACE}:hfToken" in config else None
    withheld = hf_token_withheld(cfg, stack) if token is not None else None
    if withheld:
        warnings.append(withheld)
        token = None
    parts = stack_objects(cfg, hf_token=token)
    return Rendered(manifests=parts.manifests(), outputs=parts.outputs, warnings=warnings)


def render_unchecked(cfg: StackConfig) -> list[dict]:
    """The objects of a parsed config that skipped the gate's cross-field rules: what the pack alone
    would see. For tests that compare the two gates; a user's path always goes through the gate."""
    return stack_objects(cfg).manifests()


def render_stack_file(path: pathlib.Path, stack: str) -> Rendered:
    config, secrets = read_config(path)
    return render_config(config, secrets, stack)


def manifest_path(manifest: dict) -> str:
    """The provider's file name for an object (`:` and `/` become `_`; cluster objects in `default`)."""

    def sanitise(text: str) -> str:
        return text.replace("/", "_").replace(":", "_")

    namespace = manifest.get("metadata", {}).get("namespace") or "default"
    folder = "0-crd" if manifest["kind"] == "CustomResourceDefinition" else "1-manifest"
    name = manifest["metadata"]["name"]
    return f"{folder}/{sanitise(manifest['apiVersion'])}-{manifest['kind'].lower()}-{namespace}-{name}.yaml"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the EPP config, probe scripts) as literal blocks, readable in review."""


def _str(dumper: yaml.SafeDumper, text: str):
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(manifest: dict) -> str:
    return yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, width=120)


def write(manifests: list[dict], out: pathlib.Path) -> list[pathlib.Path]:
    """Replace `out` with one YAML file per object, atomically: a failed render leaves `out` as it was."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    written = []
    try:
        for manifest in manifests:
            target = staging / manifest_path(manifest)
            if target.exists():
                raise ValueError(f"two objects render to {manifest_path(manifest)}: object names must be unique")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(to_yaml(manifest))
            written.append(out / target.relative_to(staging))
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return sorted(written)
