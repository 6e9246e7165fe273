"""How the project's language host starts a policy pack (scripts/langhost/main.go, RunPlugin), with the real CLI:
as upstream's by default, the stack's configuration in the pack's environment (a proxy answers the engine's
ConfigureStack first), and at once, the engine talking to the pack itself, when the pack says `readsStackConfig:
false` in PulumiPolicy.yaml (as policy/ does)."""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.e2e

# A pack that reports, as an advisory finding, the stack its process was started for.
PROBE = """
import os
from pulumi_policy import EnforcementLevel, PolicyPack, StackValidationPolicy

def validate(args, report_violation):
    report_violation("started for stack " + os.environ.get("PULUMI_STACK", "(none)"))

PolicyPack(
    name="probe",
    policies=[StackValidationPolicy(name="probe-stack", description="The stack the pack was started for.",
                                    validate=validate)],
    enforcement_level=EnforcementLevel.ADVISORY,
)
"""


def probe_preview(project, options: dict):
    pack = project.root / "probe-pack"
    pack.mkdir(exist_ok=True)
    (pack / "__main__.py").write_text(PROBE)
    runtime = {"name": "python", "options": {"virtualenv": "../.venv", **options}}
    (pack / "PulumiPolicy.yaml").write_text(yaml.safe_dump({"version": "0.0.1", "runtime": runtime}))
    project.select("dev")
    return project.pulumi("preview", "-s", "dev", "--policy-pack", "probe-pack")


def test_a_pack_that_reads_the_stack_config_is_started_with_it(project):
    proc = probe_preview(project, {})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "started for stack dev" in proc.stdout


def test_a_pack_that_reads_no_stack_config_is_started_at_once_and_judges_as_before(project):
    proc = probe_preview(project, {"readsStackConfig": False})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "started for stack (none)" in proc.stdout  # no proxy set its environment: the engine talks to it


def test_a_readsstackconfig_that_is_not_a_boolean_is_refused(project):
    proc = probe_preview(project, {"readsStackConfig": "no"})
    assert proc.returncode != 0
    assert "the readsStackConfig option must be true or false, not no" in proc.stdout + proc.stderr
