"""`python -m stacks check --format sarif`: SARIF 2.1.0 (validated against the OASIS schema in
tests/data), one rule per policy, each finding at the file and line of the offending object."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import jsonschema
import pytest
import yaml

from core.stackfile import PROJECT_ROOT
from policy import catalog, levels
from tests.policy.test_check import DECODE_FILE, GOLDEN, copy_of_golden, decode_claim_8

SCHEMA = json.loads((PROJECT_ROOT / "tests" / "data" / "sarif-2.1.0.schema.json").read_text())


def sarif(*args: str, cwd: pathlib.Path = PROJECT_ROOT) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "check", *args, "--format", "sarif"],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def assert_valid(log: dict) -> None:
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(log)]
    assert not errors, errors


def test_schema_is_the_oasis_one():
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    assert SCHEMA["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")


def test_good_render_is_valid_sarif_without_errors(tmp_path):
    code, log = sarif("--manifests", str(copy_of_golden(tmp_path).parent))
    assert code == 0
    assert_valid(log)
    assert log["version"] == "2.1.0"
    assert not [r for r in log["runs"][0]["results"] if r["level"] == "error"]


def test_one_rule_per_policy_with_description_and_level(tmp_path):
    _, log = sarif("--manifests", str(copy_of_golden(tmp_path).parent), "--environment", "dev")
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [spec.name for spec in catalog.POLICIES]
    settings = catalog.resolve(catalog.load_config(levels.environment_config("dev")))
    for rule, spec in zip(rules, catalog.POLICIES, strict=True):
        assert rule["shortDescription"]["text"] == spec.description
        assert rule["properties"]["enforcementLevel"] == settings[spec.name].level
        assert (
            rule["defaultConfiguration"]["level"]
            == {"mandatory": "error", "advisory": "warning"}[settings[spec.name].level]
        )


def test_bad_render_is_valid_sarif_with_the_finding_at_its_file_and_line(tmp_path):
    folder = copy_of_golden(tmp_path)
    decode_claim_8(folder)
    code, log = sarif("--manifests", str(folder.parent), cwd=tmp_path)
    assert code == 1
    assert_valid(log)
    run = log["runs"][0]
    errors = [r for r in run["results"] if r["level"] == "error"]
    assert len(errors) == 1, errors
    error = errors[0]
    assert error["ruleId"] == "npu-claim-matches-parallelism"
    assert run["tool"]["driver"]["rules"][error["ruleIndex"]]["id"] == error["ruleId"]
    physical = error["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {"uri": f"render/1-manifest/{DECODE_FILE}", "uriBaseId": "SRCROOT"}
    assert physical["region"]["startLine"] == 1
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"] == tmp_path.resolve().as_uri() + "/"
    assert (
        error["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "Deployment/rebel100/minimax-m27-decode"
    )


def test_line_of_an_object_inside_a_multi_document_file(tmp_path):
    """helm-style output: the finding points at the line where the offending object's document starts."""
    documents = [yaml.safe_load(p.read_text()) for p in sorted(GOLDEN.glob("*.yaml"))]
    decode = next(d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("decode"))
    decode["spec"]["template"]["spec"]["containers"][0]["image"] = "example.com/vllm-rbln:latest"
    chart = tmp_path / "chart" / "templates"
    chart.mkdir(parents=True)
    bodies = [yaml.safe_dump(d) for d in documents]
    (chart / "all.yaml").write_text("---\n" + "---\n".join(bodies))
    k = documents.index(decode)
    start = 2 + sum(body.count("\n") + 1 for body in bodies[:k])  # each body ends in a newline, then `---`
    assert (chart / "all.yaml").read_text().splitlines()[start - 2] == "---"
    code, log = sarif("--manifests", str(tmp_path / "chart"), cwd=tmp_path)
    assert code == 1
    assert_valid(log)
    error = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "image-tag-pinned")
    physical = error["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"]["uri"] == "chart/templates/all.yaml"
    assert physical["region"]["startLine"] == start > 1


def test_kind_list_items_are_located_at_their_item(tmp_path):
    decode = yaml.safe_load((GOLDEN / DECODE_FILE).read_text())
    decode["spec"]["template"]["spec"]["containers"][0]["image"] = "example.com/vllm-rbln"
    (tmp_path / "list.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "rebel100"}},
                    decode,
                ],
            }
        )
    )
    _code, log = sarif("--manifests", str(tmp_path), cwd=tmp_path)
    assert_valid(log)
    error = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "image-tag-pinned")
    line = error["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert (tmp_path / "list.yaml").read_text().splitlines()[line - 1].lstrip("- ").startswith("apiVersion: apps/v1")


def test_a_stack_without_findings_is_a_valid_log_without_results():
    code, log = sarif("prod-4p4d")
    assert code == 0
    assert_valid(log)
    assert log["runs"][0]["results"] == []


@pytest.mark.parametrize("stack", ["dev", "pd-router07"])
def test_stack_findings_are_located_at_the_stack_file(stack):
    code, log = sarif(stack)
    assert code == 0
    assert_valid(log)
    results = log["runs"][0]["results"]
    assert results, "the stacks have advisories (dev: hygiene relaxed to advice; pd-router07: sidecar-ssrf-capable)"
    config_line = next(
        i
        for i, line in enumerate((PROJECT_ROOT / f"Pulumi.{stack}.yaml").read_text().splitlines(), 1)
        if line.startswith("config:")
    )
    for result in results:
        physical = result["locations"][0]["physicalLocation"]
        assert physical["artifactLocation"] == {"uri": f"Pulumi.{stack}.yaml", "uriBaseId": "SRCROOT"}
        assert physical["region"]["startLine"] == config_line
        assert result["properties"]["renderedFile"].startswith("1-manifest/")
