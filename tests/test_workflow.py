"""The PR workflow a team copies: no checkout outside the project, the official Pulumi action per
stack at the stack's policy level, SARIF uploaded; kept in step with the stack files."""

import yaml

from core import stackfile
from core.gate import load_config
from core.stackfile import PROJECT_ROOT
from policy import levels

WORKFLOW = PROJECT_ROOT / ".github" / "workflows" / "preview.yml"


def jobs() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]


def steps(job: str) -> list[dict]:
    return jobs()[job]["steps"]


def test_nothing_outside_the_project_is_checked_out():
    text = WORKFLOW.read_text()
    assert "shared" not in text and "../" not in text
    for job in jobs().values():
        for step in job["steps"]:
            if str(step.get("uses", "")).startswith("actions/checkout"):
                assert "repository" not in (step.get("with") or {}) and "path" not in (step.get("with") or {})


def test_test_job_is_ci_run():
    assert any(step.get("run") == "bash .ci/run" for step in steps("test"))


def test_preview_uses_the_official_action_at_each_stacks_level():
    include = jobs()["preview"]["strategy"]["matrix"]["include"]
    assert sorted(entry["stack"] for entry in include) == stackfile.available_stacks()
    for entry in include:
        values, _ = stackfile.read_config(stackfile.stack_file(entry["stack"]))
        environment = load_config(values, source=entry["stack"]).environment
        expected = levels.environment_config(environment).relative_to(PROJECT_ROOT).as_posix()
        assert entry["policy"] == expected, entry
    action = next(step for step in steps("preview") if str(step.get("uses", "")).startswith("pulumi/actions@"))
    assert action["uses"] == "pulumi/actions@v6"
    assert action["with"]["command"] == "preview" and action["with"]["comment-on-pr"] is True
    assert action["with"]["policyPacks"] == "policy" and action["with"]["policyPackConfigs"] == "${{ matrix.policy }}"
    assert action["with"]["cloud-url"] == "${{ secrets.PULUMI_BACKEND_URL }}"
    assert jobs()["preview"]["permissions"]["pull-requests"] == "write"


def test_findings_are_uploaded_as_sarif():
    job = jobs()["findings"]
    assert job["permissions"]["security-events"] == "write"
    assert sorted(job["strategy"]["matrix"]["stack"]) == stackfile.available_stacks()
    upload = next(
        step for step in job["steps"] if str(step.get("uses", "")).startswith("github/codeql-action/upload-sarif")
    )
    assert upload["if"] == "always()"
    assert any("--format sarif" in str(step.get("run", "")) for step in job["steps"])
