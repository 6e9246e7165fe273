"""`python -m stacks check`: the config gate, the offline render and the policy pack, without Pulumi.

  check STACK | --config-file FILE   validate the stack's config, render it offline, run the pack
  check --manifests DIR              run the pack over every *.yaml / *.yml under DIR (e.g. `helm template`)
  --format text|json|sarif           the report (`--json` is `--format json`; sarif: see stacks/sarif.py)

The pack's rules are called directly (`policy.catalog.evaluate`), with the same enforcement file CI
passes to `pulumi preview --policy-pack policy --policy-pack-config`: `policy/config/dev.json` for a
dev stack (image, request, NetworkPolicy and PodMonitor hygiene, RBAC, security contexts, disruption
budgets and engine spread advisory), `prod.json` otherwise;
`--environment dev|prod` overrides the choice (default prod for --manifests). Exit status: 0 no mandatory
violation (advisories are printed), 1 invalid config or a mandatory violation, 2 usage error.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time
from typing import Any

import yaml

from core import stackfile
from core.stackfile import PROJECT_ROOT
from policy import catalog, facts, levels, parallelism


def load_manifests(folder: pathlib.Path) -> list[dict]:
    """Every object of every YAML file under `folder` (multi-document files, `kind: List` expanded)."""
    manifests: list[dict] = []
    files = sorted(p for pattern in ("*.yaml", "*.yml") for p in folder.rglob(pattern) if p.is_file())
    for path in files:
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "List":
                manifests += [item for item in document.get("items") or [] if isinstance(item, dict)]
            elif isinstance(document, dict) and document.get("kind"):
                manifests.append(document)
    return manifests


def _stack_manifests(path: pathlib.Path, name: str, fmt: str) -> tuple[list[dict] | None, str, str, dict]:
    """(manifests, what was checked, environment, the stack's own hardware and model facts) of a stack;
    manifests None when its config is invalid or its render fails the strict validator."""
    from core.gate import ConfigError
    from stacks import render

    try:
        cfg = stackfile.load_stack(path, name)
    except (ConfigError, stackfile.StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return None, name, "", {}
    print(f"config of stack {name!r}: valid", file=sys.stdout if fmt == "text" else sys.stderr)
    rendered = render.render_stack_file(path, name)
    for warning in rendered.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    manifests = rendered.manifests
    refused = schema_problems(manifests)
    if refused:
        print(
            f"error: the render of stack {name!r} fails the strict validator (`python -m stacks validate`: "
            f"Kubernetes schemas and the CRDs in crds/), so the API server would refuse it:",
            file=sys.stderr,
        )
        for line in refused:
            print(f"  - {line}", file=sys.stderr)
        return None, name, "", {}
    return manifests, f"stack {name!r} (offline render)", cfg.environment, facts.stack_values(cfg)


def schema_problems(manifests: list[dict]) -> list[str]:
    """What the strict validator of `python -m stacks validate` refuses in a render: one verdict for both."""
    from stacks import validate

    return validate.problems_of(manifests)


def output_format(args) -> str:
    return getattr(args, "format", None) or ("json" if args.json else "text")


def run_check(args, stack: tuple[pathlib.Path, str] | None = None) -> int:
    """`check` of the stack (path, name) or of `args.manifests`."""
    if bool(args.manifests) == bool(args.stack or args.config_file):
        print("error: give a STACK (or --config-file FILE), or --manifests DIR, not both", file=sys.stderr)
        return 2
    if args.manifests:
        folder = pathlib.Path(args.manifests)
        if not folder.is_dir():
            print(f"error: {folder} is not a folder", file=sys.stderr)
            return 2
        try:
            manifests = load_manifests(folder)
        except yaml.YAMLError as error:
            print(f"error: {folder}: {error}", file=sys.stderr)
            return 2
        subject, environment = f"{len(manifests)} objects under {folder}", "prod"
        stack_facts: dict[str, Any] = {}
    else:
        assert stack is not None  # cmd_check passes the stack with STACK or --config-file
        read, subject, environment, stack_facts = _stack_manifests(*stack, output_format(args))
        if read is None:
            return 1
        manifests = read
    environment = args.environment or environment
    config_path = levels.environment_config(environment)
    try:
        config = catalog.with_facts(catalog.load_config(config_path), stack_facts)
        started = time.perf_counter()
        violations = catalog.evaluate(manifests, config)
        elapsed_ms = 1000 * (time.perf_counter() - started)
        skipped = parallelism.skip_note(
            manifests,
            {
                name: setting.facts
                for name, setting in catalog.resolve(config).items()
                if setting.level != catalog.DISABLED
            },
        )
    except catalog.PackConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    mandatory = [v for v in violations if v.mandatory]
    advisory = [v for v in violations if not v.mandatory]
    if output_format(args) == "sarif":
        from stacks import sarif

        print(
            sarif.for_check(
                manifests,
                violations,
                config,
                environment=environment,
                policy_config=config_path,
                subject=subject,
                manifests_dir=pathlib.Path(args.manifests) if args.manifests else None,
                stack_file=stack[0] if stack else None,
            )
        )
    elif output_format(args) == "json":
        print(
            json.dumps(
                {
                    "subject": subject,
                    "environment": environment,
                    "policyConfig": str(config_path),
                    "objects": len(manifests),
                    "evaluationMs": round(elapsed_ms, 2),
                    "mandatory": len(mandatory),
                    "advisory": len(advisory),
                    "skipped": skipped,
                    "violations": [
                        {"policy": v.policy, "level": v.level, "resource": v.resource, "message": v.message}
                        for v in violations
                    ],
                },
                indent=2,
            )
        )
    else:
        print(
            f"policy pack {catalog.PACK_NAME} over {subject}, environment {environment} "
            f"({config_path.relative_to(PROJECT_ROOT)})"
        )
        for violation in mandatory + advisory:
            print(violation.line())
        if skipped:
            print(skipped)
        print(
            f"{len(mandatory)} mandatory and {len(advisory)} advisory violations from {len(catalog.POLICIES)} "
            f"policies over {len(manifests)} objects; evaluated in {elapsed_ms:.1f} ms"
        )
    return 1 if mandatory else 0
