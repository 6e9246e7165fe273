"""The pack on foreign manifests: the llm-d-modelservice chart's example renders, GPU and ATOM engines.

Each render is checked on its own and must give exactly the findings written down in
fixtures/llm-d-modelservice/expected.yaml (security and hygiene only); hand edits of those renders show
that a wrong device count is still caught on a GPU, Gaudi or ATOM pod, with the source named.
"""

from __future__ import annotations

import collections
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

from core.stackfile import PROJECT_ROOT
from policy import catalog, levels, parallelism
from tests.policy.fixtures import assert_verdict, run_policy, set_arg

FOLDER = pathlib.Path(__file__).resolve().parent / "fixtures" / "llm-d-modelservice"
EXPECTED = yaml.safe_load((FOLDER / "expected.yaml").read_text())
RENDERS = sorted(p.name for p in FOLDER.glob("output-*.yaml"))
# The policies that must stay quiet on a foreign render unless it is really wrong.
ENGINE_POLICIES = {
    spec.name
    for spec in catalog.POLICIES
    if spec.rule.__module__ in ("policy.parallelism", "policy.memory", "policy.wiring")
}
CLAIM = "npu-claim-matches-parallelism"


def load(name: str) -> list[dict]:
    text = (FOLDER / name).read_text()
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind")]


def prod_config() -> dict:
    return catalog.load_config(levels.environment_config("prod"))


def all_facts() -> dict:
    return {name: setting.facts for name, setting in catalog.resolve(prod_config()).items()}


def deployment(manifests: list[dict], suffix: str) -> dict:
    return next(m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"].endswith(suffix))


def vllm(manifests: list[dict], suffix: str) -> dict:
    return next(
        c for c in deployment(manifests, suffix)["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"
    )


def test_every_render_has_its_expectations():
    assert sorted(EXPECTED) == RENDERS


@pytest.mark.parametrize("name", RENDERS)
def test_render_gives_exactly_the_expected_findings(name):
    found = collections.Counter((v.policy, v.resource) for v in catalog.evaluate(load(name), prod_config()))
    expected = collections.Counter({(policy, resource): count for policy, resource, count in EXPECTED[name] or []})
    assert found == expected, "\n".join(v.line()[:240] for v in catalog.evaluate(load(name), prod_config()))


@pytest.mark.parametrize("name", RENDERS)
def test_no_parallelism_memory_or_wiring_finding(name):
    assert [v.line() for v in catalog.evaluate(load(name), prod_config()) if v.policy in ENGINE_POLICIES] == []
    assert not any(policy in ENGINE_POLICIES for policy, _, _ in EXPECTED[name] or [])


# --- a wrong device count is still caught, naming where the devices come from -----------------------------


def test_gpu_pod_with_tp4_on_two_gpus_is_caught():
    manifests = load("output-pd.yaml")
    set_arg(vllm(manifests, "-prefill"), "--tensor-parallel-size", "4")
    for field in ("limits", "requests"):
        vllm(manifests, "-prefill")["resources"][field]["nvidia.com/gpu"] = "2"
    assert_verdict(
        run_policy(CLAIM, manifests),
        resource="Deployment/pd-llm-d-modelservice-prefill",
        level="mandatory",
        contains=(
            "claims 2 accelerators through limits nvidia.com/gpu 2",
            "TP 4 x PP 1 x DP-local 1 = 4",
            "every rank needs one accelerator",
            "Set limits and requests nvidia.com/gpu to 4",
        ),
    )


def test_gpu_count_comes_from_requests_when_there_are_no_limits():
    manifests = load("output-pd.yaml")
    resources = vllm(manifests, "-decode")["resources"]
    del resources["limits"]["nvidia.com/gpu"]
    set_arg(vllm(manifests, "-decode"), "--tensor-parallel-size", "2")
    assert_verdict(
        run_policy(CLAIM, manifests),
        resource="Deployment/pd-llm-d-modelservice-decode",
        level="mandatory",
        contains=(
            "claims 1 accelerators through requests nvidia.com/gpu 1",
            "= 2",
            "Set limits and requests nvidia.com/gpu to 2",
        ),
    )


def atom_engine(tp: str, atoms: str) -> list[dict]:
    """The ATOM render with the engine started as `vllm serve` (the chart relies on the image's entrypoint)."""
    manifests = load("output-rebellions-atom.yaml")
    container = vllm(manifests, "-decode")
    container["command"] = ["vllm", "serve"]
    set_arg(container, "--tensor-parallel-size", tp)
    for field in ("limits", "requests"):
        container["resources"][field]["rebellions.ai/ATOM"] = atoms
    return manifests


def test_atom_pod_with_tp4_on_four_atoms_passes():
    manifests = atom_engine("4", "4")
    assert run_policy(CLAIM, manifests) == []
    assert [v for v in catalog.evaluate(manifests, prod_config()) if v.policy in ENGINE_POLICIES] == []


def test_atom_pod_with_tp4_on_two_atoms_is_caught():
    assert_verdict(
        run_policy(CLAIM, atom_engine("4", "2")),
        resource="Deployment/rebellions-atom-llm-d-modelservice-decode",
        level="mandatory",
        contains=("limits rebellions.ai/ATOM 2", "= 4"),
    )


def test_gaudi_dra_claim_count_is_compared():
    manifests = load("output-dra.yaml")
    template = next(m for m in manifests if m["kind"] == "ResourceClaimTemplate")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 4
    assert_verdict(
        run_policy(CLAIM, manifests),
        resource="Deployment/dra-llm-d-modelservice-decode",
        level="mandatory",
        contains=(
            "4 accelerators through ResourceClaimTemplate intel-gaudi-claim-template-decode",
            "(deviceClassName gaudi.intel.com)",
            "TP 2 x PP 1 x DP-local 1 = 2",
            "Set the claim count to 2",
        ),
    )


def test_missing_claim_template_is_reported_when_the_devices_do_not_add_up():
    """mnnvl's IMEX channel template comes from outside the chart: quiet while nvidia.com/gpu matches TP, named once
    not."""
    manifests = load("output-pd-mnnvl.yaml")
    for field in ("limits", "requests"):
        del vllm(manifests, "-decode")["resources"][field]["nvidia.com/gpu"]
    assert_verdict(
        run_policy(CLAIM, manifests),
        resource="Deployment/pd-mnnvl-llm-d-modelservice-decode",
        level="mandatory",
        contains=(
            "spec.resourceClaims[llm-d-imex-channel-0] references ResourceClaimTemplate llm-d-imex-channel-0, "
            "which is not among the resources",
            "0 accelerators can be read",
            "= 1",
        ),
    )


def test_claim_of_an_unknown_device_class_is_reported_until_configured():
    manifests = load("output-heterogeneous-pd.yaml")
    template = next(m for m in manifests if m["kind"] == "ResourceClaimTemplate")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "tpu.example.com"
    assert_verdict(
        run_policy(CLAIM, manifests),
        resource="Deployment/heterogeneous-pd-llm-d-modelservice-decode",
        level="mandatory",
        contains=("claims no NPUs or other accelerators", "acceleratorDeviceClasses gpu.nvidia.com"),
    )
    # A pod that claims devices through DRA is no CPU engine, even when none of its devices counts.
    assert "read as CPU engines" not in (parallelism.skip_note(manifests, all_facts()) or "")
    config = {CLAIM: {"acceleratorDeviceClasses": ["tpu.example.com"]}}
    assert run_policy(CLAIM, manifests, config) == []


def test_extended_resources_come_from_the_policy_config():
    manifests = load("output-pd.yaml")
    for field in ("limits", "requests"):
        resources = vllm(manifests, "-prefill")["resources"][field]
        resources["example.com/npu"] = resources.pop("nvidia.com/gpu")
    # example.com/npu is not an accelerator resource by default: the pod looks CPU-only and is skipped ...
    assert run_policy(CLAIM, manifests) == []
    # ... and once configured, its count is compared.
    set_arg(vllm(manifests, "-prefill"), "--tensor-parallel-size", "2")
    config = {CLAIM: {"acceleratorResources": ["example.com/npu"]}}
    assert_verdict(
        run_policy(CLAIM, manifests, config),
        resource="Deployment/pd-llm-d-modelservice-prefill",
        level="mandatory",
        contains=("limits example.com/npu 1", "= 2"),
    )


def test_accelerator_lists_must_be_lists():
    with pytest.raises(ValueError, match="expected a list of strings"):
        catalog.resolve({CLAIM: {"acceleratorResources": "nvidia.com/gpu"}})


# --- what is skipped, and said so ---------------------------------------------------------------------------


def test_cpu_engine_is_skipped_and_noted():
    """A pod with no DRA claim and no accelerator resource runs on CPUs: TP x PP x DP-local counts no devices."""
    manifests = load("output-pd.yaml")
    for field in ("limits", "requests"):
        del vllm(manifests, "-prefill")["resources"][field]["nvidia.com/gpu"]
    assert run_policy(CLAIM, manifests) == []
    facts = {name: setting.facts for name, setting in catalog.resolve(prod_config()).items()}
    note = parallelism.skip_note(manifests, facts)
    assert note.startswith(
        "skipped: 2 non-Rebel100 engines (Deployment/pd-llm-d-modelservice-decode, "
        "Deployment/pd-llm-d-modelservice-prefill) for npu-devices-fit-node; "
    ), note
    assert "1 engines without accelerators, read as CPU engines (Deployment/pd-llm-d-modelservice-prefill)" in note


def test_npus_per_node_is_not_applied_to_gpu_pods():
    manifests = load("output-pd.yaml")
    set_arg(vllm(manifests, "-prefill"), "--tensor-parallel-size", "16")
    for field in ("limits", "requests"):
        vllm(manifests, "-prefill")["resources"][field]["nvidia.com/gpu"] = "16"
    assert run_policy("npu-devices-fit-node", manifests) == []
    assert run_policy(CLAIM, manifests) == []


def test_the_programs_renders_skip_nothing(renders):
    facts = {name: setting.facts for name, setting in catalog.resolve(prod_config()).items()}
    for stack, manifests in renders.items():
        assert parallelism.skip_note(manifests, facts) is None, stack


def test_check_prints_the_skip_line(tmp_path):
    shutil.copy(FOLDER / "output-pd.yaml", tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "--manifests", str(tmp_path)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the chart's :latest images etc. are mandatory in prod
    assert CLAIM not in proc.stdout
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("skipped:")]
    assert skipped == [
        "skipped: 2 non-Rebel100 engines (Deployment/pd-llm-d-modelservice-decode, "
        "Deployment/pd-llm-d-modelservice-prefill) for npu-devices-fit-node"
    ], proc.stdout


def test_disabled_policy_is_not_noted():
    manifests = load("output-pd.yaml")
    facts = {
        name: setting.facts
        for name, setting in catalog.resolve({"npu-devices-fit-node": "disabled"}).items()
        if setting.level != catalog.DISABLED
    }
    assert parallelism.skip_note(manifests, facts) is None
    assert manifests == load("output-pd.yaml")  # the rules never edit what they read


def test_unreadable_extended_resource_is_named():
    manifests = load("output-pd.yaml")
    vllm(manifests, "-prefill")["resources"]["limits"]["nvidia.com/gpu"] = "1.5"
    assert_verdict(
        run_policy(CLAIM, manifests),
        resource="Deployment/pd-llm-d-modelservice-prefill",
        level="mandatory",
        contains=("limits nvidia.com/gpu '1.5' is not a whole number", "cannot be counted"),
    )
    # An accelerator resource it cannot read is still an accelerator: the pod is no CPU engine.
    assert "read as CPU engines" not in (parallelism.skip_note(manifests, all_facts()) or "")


def test_zero_accelerators_is_a_count_not_an_unreadable_one():
    """`nvidia.com/gpu: "0"` is a whole number: the pod has no accelerator and runs on CPUs, as without the key."""
    manifests = load("output-pd.yaml")
    for field in ("limits", "requests"):
        vllm(manifests, "-prefill")["resources"][field]["nvidia.com/gpu"] = "0"
    assert run_policy(CLAIM, manifests) == []
    assert "1 engines without accelerators, read as CPU engines (Deployment/pd-llm-d-modelservice-prefill)" in (
        parallelism.skip_note(manifests, all_facts())
    )
