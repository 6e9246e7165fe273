"""The project's strict manifest validator (`python -m stacks validate`): built-in kinds through
kubernetes-validate, custom resources through the CRDs vendored in crds/, defaults before strictness."""

import copy
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

from core.stackfile import PROJECT_ROOT
from stacks import validate

GOLDEN = PROJECT_ROOT / "tests" / "golden" / "dev" / "1-manifest"
DEPLOYMENT = GOLDEN / "apps_v1-deployment-rebel100-minimax-m27-decode.yaml"
POOL = GOLDEN / "inference.networking.k8s.io_v1-inferencepool-rebel100-minimax-m27-pool.yaml"


def load(path: pathlib.Path) -> dict:
    return yaml.safe_load(path.read_text())


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "stacks", "validate", *args], cwd=PROJECT_ROOT, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def crds():
    return validate.load_crds()


def test_every_vendored_crd_kind_has_a_schema(crds):
    kinds = {kind for _, kind in crds}
    assert {
        "Gateway",
        "GatewayClass",
        "HTTPRoute",
        "ReferenceGrant",
        "InferencePool",
        "InferenceObjective",
        "PodMonitor",
        "ServiceMonitor",
    } <= kinds


def test_kubernetes_134_and_135_schemas_are_bundled():
    assert validate.supported("1.34.0") and validate.supported("1.35") and validate.supported("v1.34.2")
    assert not validate.supported("1.99.0")


def test_valid_render_passes(tmp_path):
    proc = run(str(PROJECT_ROOT / "tests" / "golden" / "dev"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 invalid, 0 unchecked" in proc.stdout.splitlines()[-1]


def test_unknown_field_in_a_deployment_fails_naming_its_path(tmp_path):
    deployment = load(DEPLOYMENT)
    deployment["spec"]["template"]["spec"]["containers"][0]["gpuCount"] = 4
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(deployment))
    proc = run(str(tmp_path))
    assert proc.returncode == 1, proc.stdout
    assert "INVALID" in proc.stdout and "spec.template.spec.containers.0" in proc.stdout
    assert "gpuCount" in proc.stdout


def test_unknown_field_in_an_inference_pool_fails_naming_its_path(crds):
    pool = load(POOL)
    pool["spec"]["endpointPickerRef"]["portNumber"] = 9002  # a typo the API server would silently prune
    status, errors = validate.validate_object(pool, crds)
    assert status == validate.INVALID
    assert any(e.startswith("spec.endpointPickerRef:") and "portNumber" in e for e in errors), errors


def test_wrong_type_in_a_custom_resource_fails(crds):
    pool = load(POOL)
    pool["spec"]["targetPorts"][0]["number"] = "8000"
    status, errors = validate.validate_object(pool, crds)
    assert status == validate.INVALID and any(e.startswith("spec.targetPorts.0.number:") for e in errors), errors


def test_crd_defaults_are_applied_as_the_api_server_does(crds):
    pool = load(POOL)
    del pool["spec"]["endpointPickerRef"]["failureMode"]
    schema = crds[("inference.networking.k8s.io/v1", "InferencePool")]
    defaulted = validate.apply_defaults(schema, copy.deepcopy(pool))
    assert defaulted["spec"]["appProtocol"] == "http"
    assert defaulted["spec"]["endpointPickerRef"]["failureMode"] == "FailClose"
    assert defaulted["spec"]["endpointPickerRef"]["kind"] == "Service"
    assert validate.validate_object(pool, crds) == (validate.OK, [])


def test_a_required_field_with_a_default_is_satisfied_by_the_default(tmp_path):
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["mode"],
                                    "properties": {
                                        "mode": {"type": "string", "default": "fast"},
                                        "note": {"type": "string", "nullable": True},
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    (tmp_path / "crd.yaml").write_text(yaml.safe_dump(crd))
    crds = validate.load_crds(tmp_path)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"note": None}}
    assert validate.validate_object(widget, crds) == (validate.OK, [])
    widget["spec"]["speed"] = 3
    status, errors = validate.validate_object(widget, crds)
    assert status == validate.INVALID and errors[0].startswith("spec:") and "speed" in errors[0]


def test_a_kind_without_schema_is_unchecked_not_failed(tmp_path):
    (tmp_path / "x.yaml").write_text(
        yaml.safe_dump(
            {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"any": 1}}
        )
    )
    proc = run(str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "UNCHECKED" in proc.stdout and "1 unchecked" in proc.stdout


def test_usage_errors_exit_2(tmp_path):
    assert run(str(tmp_path)).returncode == 2  # no manifests
    assert run(str(tmp_path / "missing")).returncode == 2
    proc = run(str(PROJECT_ROOT / "tests" / "golden" / "dev"), "--k8s-version", "1.99.0")
    assert proc.returncode == 2 and "1.34" in proc.stderr


def test_not_yaml_is_invalid(tmp_path):
    (tmp_path / "bad.yaml").write_text("a: [unclosed\n")
    proc = run(str(tmp_path))
    assert proc.returncode == 1 and "not valid YAML" in proc.stdout


def test_the_cached_validator_gives_kubernetes_validates_verdict():
    """validate_object builds each built-in kind's validator once; on every golden object, and on copies with an
    unknown field or a wrongly typed name, its verdict is the library's own `validate`."""
    import kubernetes_validate
    from kubernetes_validate import utils as kv_utils

    crds = validate.load_crds()
    compared = 0
    for path in sorted((PROJECT_ROOT / "tests" / "golden").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or (doc["apiVersion"], doc["kind"]) in crds:
                continue
            for variant in (doc, {**doc, "bogus": 1}, {**doc, "metadata": {**doc["metadata"], "name": 5}}):
                try:
                    kubernetes_validate.validate(variant, validate.DEFAULT_K8S_VERSION, strict=True)
                    expected = validate.OK
                except kv_utils.SchemaNotFoundError:
                    expected = validate.UNCHECKED
                except kv_utils.ValidationError:
                    expected = validate.INVALID
                assert validate.validate_object(variant, {})[0] == expected, (path.name, variant.get("bogus"))
                compared += 1
    assert compared > 100


def golden_objects(stack: str = "prod-4p4d") -> list[dict]:
    return [load(path) for path in sorted((PROJECT_ROOT / "tests" / "golden" / stack).rglob("*.yaml"))]


def test_valid_objects_are_remembered_and_not_validated_again(tmp_path, monkeypatch):
    """`check`'s verdict cache: a valid object's hash is kept under a key naming the validator; the next run
    validates nothing it has seen valid, and a changed object or an invalid one is validated every time."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("REBEL100_VALIDATE_CACHE", raising=False)
    objects = golden_objects()
    assert validate.problems_of(objects) == []
    remembered = list((tmp_path / "rebel100-stack" / "validated").glob("*/*"))
    assert len(remembered) == len({validate._object_key(o) for o in objects}) > 20

    validated = []
    real = validate.validate_object
    monkeypatch.setattr(validate, "validate_object", lambda doc, *a: validated.append(doc) or real(doc, *a))
    assert validate.problems_of(objects) == [] and validated == []

    broken = copy.deepcopy(objects[0])
    broken["spec"]["bogus"] = 1
    for _ in range(2):
        problems = validate.problems_of([broken, *objects])
        assert len(problems) == 1 and "bogus" in problems[0]
    assert validated == [broken, broken]


def test_the_verdict_cache_is_keyed_by_the_validator_and_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("REBEL100_VALIDATE_CACHE", raising=False)
    crds = tmp_path / "crds"
    crds.mkdir()
    for path in validate.CRD_DIR.glob("*.yaml"):
        (crds / path.name).write_bytes(path.read_bytes())
    key = validate._cache_dir(validate.DEFAULT_K8S_VERSION, crds)
    assert key == validate._cache_dir(validate.DEFAULT_K8S_VERSION, validate.CRD_DIR)
    assert key != validate._cache_dir("1.35.0", crds)
    (crds / "gateway.networking.k8s.io_gateways.yaml").write_text("# edited\n")
    assert validate._cache_dir(validate.DEFAULT_K8S_VERSION, crds) != key
    monkeypatch.setenv("REBEL100_VALIDATE_CACHE", "0")
    assert validate._cache_dir(validate.DEFAULT_K8S_VERSION, crds) is None
    assert validate.problems_of(golden_objects()) == []
    assert not (tmp_path / "rebel100-stack").exists()
    assert validate._object_key({"when": object()}) is None


def test_make_validate_reads_the_golden_files_and_never_rewrites_them():
    """`make validate` once depended on `golden`, so it re-rendered tests/golden before validating it: a wrong render
    was written over the reviewed files and then judged. `make -n` prints what it would run (the venv taken as
    built)."""
    if not shutil.which("make"):
        pytest.skip("no make on this machine")
    # Under `make test` this runs inside a make: without its MAKEFLAGS/MAKELEVEL the child neither inherits the
    # parent's flags nor prints "Entering directory".
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}
    proc = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", ".venv/.installed", "validate"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert proc.stdout.splitlines() == [".venv/bin/python -m stacks validate --quiet tests/golden"]
