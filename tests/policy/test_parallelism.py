"""Rules 1-3 (policy/parallelism.py): good = the program's renders, bad = named hand edits of prod-4p4d."""

import copy

import pytest

from tests.policy.conftest import STACKS
from tests.policy.fixtures import (
    DECODE,
    DECODE_CLAIM,
    PREFILL,
    assert_verdict,
    cpu_copy,
    engine,
    get,
    mutate,
    npu_request,
    pod_spec,
    run_policy,
    set_arg,
)

POLICIES = ("pp-with-dp", "npu-claim-matches-parallelism", "npu-devices-fit-node", "parallelism-fits-model")
DECODE_ID, PREFILL_ID = f"Deployment/rebel100/{DECODE}", f"Deployment/rebel100/{PREFILL}"


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", POLICIES)
def test_good_render_passes(renders, stack, policy):
    assert run_policy(policy, renders[stack]) == []


def decode_dp(size: int, *, claim: int | None = None):
    def edit(m):
        set_arg(engine(m, DECODE), "--data-parallel-size", str(size))
        set_arg(engine(m, DECODE), "--data-parallel-size-local", str(size))
        if claim is not None:
            npu_request(m, DECODE_CLAIM)["count"] = claim

    return edit


BAD = {
    "prefill-pp4-with-dp2": (
        lambda m: set_arg(engine(m, PREFILL), "--data-parallel-size", "2"),
        "pp-with-dp",
        PREFILL_ID,
        ("pipeline parallel size 4 together with data parallel size 2", "refuses"),
    ),
    "prefill-pp4-with-dp2-equals-form": (
        lambda m: set_arg(engine(m, PREFILL), "--data-parallel-size", "2", equals=True),
        "pp-with-dp",
        PREFILL_ID,
        ("pipeline parallel size 4 together with data parallel size 2",),
    ),
    "prefill-pp-not-a-number": (
        lambda m: set_arg(engine(m, PREFILL), "--pipeline-parallel-size", "four"),
        "pp-with-dp",
        PREFILL_ID,
        ("--pipeline-parallel-size 'four' is not an integer",),
    ),
    "decode-claim-count-8": (
        lambda m: npu_request(m, DECODE_CLAIM).update(count=8),
        "npu-claim-matches-parallelism",
        DECODE_ID,
        (
            "claims 8 NPUs",
            f"ResourceClaimTemplate {DECODE_CLAIM}",
            "requests[npu].exactly.count 8",
            "deviceClassName npu.rebellions.ai",
            "TP 1 x PP 1 x DP-local 4 = 4",
            "Set the claim count to 4",
        ),
    ),
    "decode-dp-local-2-equals-form": (
        lambda m: set_arg(engine(m, DECODE), "--data-parallel-size-local", "2", equals=True),
        "npu-claim-matches-parallelism",
        DECODE_ID,
        ("claims 4 NPUs", "DP-local 2 = 2", "Set the claim count to 2"),
    ),
    "prefill-tp2-short-alias": (
        lambda m: engine(m, PREFILL)["args"].extend(["-tp", "2"]),
        "npu-claim-matches-parallelism",
        PREFILL_ID,
        ("claims 4 NPUs", "TP 2 x PP 4 x DP-local 1 = 8"),
    ),
    "decode-claim-template-missing": (
        lambda m: m.remove(get(m, "ResourceClaimTemplate", DECODE_CLAIM)),
        "npu-claim-matches-parallelism",
        DECODE_ID,
        (f"references ResourceClaimTemplate {DECODE_CLAIM}, which is not among the resources",),
    ),
    "decode-container-claims-nothing": (
        lambda m: engine(m, DECODE)["resources"].pop("claims"),
        "npu-claim-matches-parallelism",
        DECODE_ID,
        ("claims no NPUs", "= 4"),
    ),
    "decode-dp16-on-8-npu-nodes": (
        decode_dp(16, claim=16),
        "npu-devices-fit-node",
        DECODE_ID,
        ("claims 16 NPUs", "need 16", "npusPerNode 8", "at most 8"),
    ),
    "prefill-pp64-over-62-layers": (
        lambda m: set_arg(engine(m, PREFILL), "--pipeline-parallel-size", "64"),
        "parallelism-fits-model",
        PREFILL_ID,
        ("pipeline parallel size 64", "62 layers"),
    ),
    "decode-dp3-expert-parallel": (
        decode_dp(3, claim=3),
        "parallelism-fits-model",
        DECODE_ID,
        ("data parallel 3 x tensor parallel 1 = 3", "256 experts"),
    ),
    "decode-pp2": (
        lambda m: set_arg(engine(m, DECODE), "--pipeline-parallel-size", "2"),
        "parallelism-fits-model",
        DECODE_ID,
        (
            "decode container vllm arg --pipeline-parallel-size: pipeline parallel size 2 on decode",
            "not usable for decode",
        ),
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_is_rejected(prod, case):
    edit, policy, resource, contains = BAD[case]
    assert_verdict(run_policy(policy, mutate(prod, edit)), resource=resource, level="mandatory", contains=contains)


def test_decode_pp2_is_also_pp_with_dp(prod):
    bad = mutate(prod, BAD["decode-pp2"][0])
    assert_verdict(
        run_policy("pp-with-dp", bad),
        resource=DECODE_ID,
        level="mandatory",
        contains=("pipeline parallel size 2 together with data parallel size 4",),
    )


def test_npus_per_node_comes_from_the_policy_config(prod):
    config = {"npu-devices-fit-node": {"npusPerNode": 2}}
    violations = run_policy("npu-devices-fit-node", prod, config)
    assert {v.resource for v in violations} == {DECODE_ID, PREFILL_ID}
    assert all("npusPerNode 2" in v.message for v in violations)


def test_npu_device_class_comes_from_the_policy_config(prod):
    violations = run_policy(
        "npu-claim-matches-parallelism", prod, {"npu-claim-matches-parallelism": {"npuDeviceClass": "other.example"}}
    )
    assert {v.resource for v in violations} == {DECODE_ID, PREFILL_ID}
    assert all("claims no NPUs" in v.message and "deviceClassName other.example" in v.message for v in violations)


def test_shell_form_command_is_read(prod):
    """`sh -c "vllm serve ..."` (common in hand-written manifests) is parsed like the list form."""

    def shell_form(m):
        container = engine(m, PREFILL)
        words = ["vllm", "serve", *container.pop("args"), "--data-parallel-size", "2"]
        container["command"] = ["/bin/sh", "-c", " ".join(f"'{w}'" if "{" in w else w for w in words)]

    assert_verdict(
        run_policy("pp-with-dp", mutate(prod, shell_form)),
        resource=PREFILL_ID,
        level="mandatory",
        contains=("pipeline parallel size 4 together with data parallel size 2",),
    )


def test_bare_pod_is_checked_too(prod):
    """Rules read pod templates of any workload kind, and bare Pods."""
    deployment = get(prod, "Deployment", PREFILL)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hand-made", "namespace": "rebel100"},
        "spec": mutate([pod_spec([deployment], PREFILL)], lambda m: None)[0],
    }
    set_arg(next(c for c in pod["spec"]["containers"] if c["name"] == "vllm"), "--data-parallel-size", "2")
    assert_verdict(
        run_policy("pp-with-dp", [pod]),
        resource="Pod/rebel100/hand-made",
        level="mandatory",
        contains=("data parallel size 2",),
    )


def test_a_container_without_accelerators_is_told_which_ones_count(prod):
    """The message lists the DeviceClasses and extended resources that would count, `(none)` for an empty list."""
    bad = mutate(prod, lambda m: engine(m, DECODE)["resources"].pop("claims"))
    (violation,) = run_policy("npu-claim-matches-parallelism", bad)
    assert violation.message.startswith(
        "container vllm claims no NPUs or other accelerators (resources.claims has no request of deviceClassName "
        "npu.rebellions.ai or of acceleratorDeviceClasses gpu.nvidia.com, gpu.amd.com, gpu.intel.com, gaudi.intel.com, "
        "and limits/requests have none of acceleratorResources nvidia.com/gpu, amd.com/gpu, gpu.intel.com/i915, "
        "gpu.intel.com/xe, habana.ai/gaudi, rebellions.ai/ATOM, rebellions.ai/REBEL) but its args need TP 1 x PP 1 x "
        "DP-local 4 = 4"
    ), violation.message
    none = {"npu-claim-matches-parallelism": {"acceleratorDeviceClasses": [], "acceleratorResources": []}}
    (violation,) = run_policy("npu-claim-matches-parallelism", bad, none)
    assert (
        "or of acceleratorDeviceClasses (none), and limits/requests have none of acceleratorResources (none)) but"
        in violation.message
    ), violation.message


def test_a_claim_request_in_the_flat_v1beta1_form_is_counted(prod):
    def flat(m):
        request = next(
            r
            for r in get(m, "ResourceClaimTemplate", DECODE_CLAIM)["spec"]["spec"]["devices"]["requests"]
            if r["name"] == "npu"
        )
        request.update(request.pop("exactly"))

    assert run_policy("npu-claim-matches-parallelism", mutate(prod, flat)) == []
    wrong = mutate(prod, flat, lambda m: set_arg(engine(m, DECODE), "--data-parallel-size-local", "2"))
    (violation,) = run_policy("npu-claim-matches-parallelism", wrong)
    assert "requests[npu].count 4 (deviceClassName npu.rebellions.ai)" in violation.message, violation.message


def test_a_first_available_request_of_npus_cannot_be_counted(prod):
    def first_available(m):
        requests = get(m, "ResourceClaimTemplate", DECODE_CLAIM)["spec"]["spec"]["devices"]["requests"]
        index = next(i for i, r in enumerate(requests) if r["name"] == "npu")
        requests[index] = {
            "name": "npu",
            "firstAvailable": [{"name": "four", "deviceClassName": "npu.rebellions.ai", "count": 4}],
        }

    (violation,) = run_policy("npu-claim-matches-parallelism", mutate(prod, first_available))
    assert (
        f"container vllm: ResourceClaimTemplate {DECODE_CLAIM} request npu uses firstAvailable: its device count "
        "cannot be checked" in violation.message
    ), violation.message


def test_a_request_of_all_npus_cannot_be_counted(prod):
    bad = mutate(prod, lambda m: npu_request(m, DECODE_CLAIM).update(allocationMode="All"))
    (violation,) = run_policy("npu-claim-matches-parallelism", bad)
    assert (
        f"container vllm: ResourceClaimTemplate {DECODE_CLAIM} request npu has allocationMode All: its device count "
        "cannot be checked" in violation.message
    ), violation.message


def test_an_exact_count_request_without_a_count_asks_for_one(prod):
    """ExactCount is the default mode and 1 the default count (resource.k8s.io/v1 DeviceRequest)."""
    bad = mutate(prod, lambda m: npu_request(m, DECODE_CLAIM).pop("count"))
    (violation,) = run_policy("npu-claim-matches-parallelism", bad)
    assert (
        f"claims 1 NPUs through ResourceClaimTemplate {DECODE_CLAIM} spec.spec.devices.requests[npu].exactly.count 1 "
        "(deviceClassName npu.rebellions.ai) but its args need TP 1 x PP 1 x DP-local 4 = 4" in violation.message
    ), violation.message
    explicit = mutate(prod, lambda m: npu_request(m, DECODE_CLAIM).update(allocationMode="ExactCount"))
    assert run_policy("npu-claim-matches-parallelism", explicit) == []


def test_a_pod_claim_of_a_resource_claim_is_read_too(prod):
    """spec.resourceClaims may name a ResourceClaim (resourceClaimName) instead of a template."""

    def as_claim(m):
        template = get(m, "ResourceClaimTemplate", DECODE_CLAIM)
        m.append(
            {
                "apiVersion": template["apiVersion"],
                "kind": "ResourceClaim",
                "metadata": {"name": "decode-npus", "namespace": "rebel100"},
                "spec": template["spec"]["spec"],
            }
        )
        pod_spec(m, DECODE)["resourceClaims"] = [{"name": "npu-rdma", "resourceClaimName": "decode-npus"}]

    assert run_policy("npu-claim-matches-parallelism", mutate(prod, as_claim)) == []
    wrong = mutate(prod, as_claim, lambda m: set_arg(engine(m, DECODE), "--data-parallel-size-local", "2"))
    (violation,) = run_policy("npu-claim-matches-parallelism", wrong)
    assert "claims 4 NPUs through ResourceClaim decode-npus spec.devices.requests[npu].exactly.count 4" in (
        violation.message
    ), violation.message
    missing = mutate(prod, lambda m: pod_spec(m, DECODE).update(resourceClaims=[{"name": "npu-rdma"}]))
    (violation,) = run_policy("npu-claim-matches-parallelism", missing)
    assert "spec.resourceClaims[npu-rdma] references ResourceClaim ?, which is not among the resources" in (
        violation.message
    ), violation.message


@pytest.mark.parametrize(
    "case, start, fact",
    [
        (
            "prefill-pp64-over-62-layers",
            "prefill container vllm arg --pipeline-parallel-size: pipeline parallel size 64 ",
            "the model's 62 layers (modelLayers)",
        ),
        (
            "decode-dp3-expert-parallel",
            "decode container vllm arg --enable-expert-parallel: expert parallel ",
            "the model's 256 experts (modelExperts)",
        ),
    ],
)
def test_the_facts_a_verdict_rests_on_are_named_by_their_pack_config_key(prod, case, start, fact):
    edit, policy, _, _ = BAD[case]
    (violation,) = run_policy(policy, mutate(prod, edit))
    assert violation.message.startswith(start) and fact in violation.message, violation.message


def test_an_engine_without_a_role_is_named_engine_and_every_engine_is_judged(prod):
    """A bare Pod of vllm serve with no role label (listed first, its args unreadable) does not stop the others."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "solo", "namespace": "rebel100"},
        "spec": {"containers": [{"name": "e", "command": ["vllm", "serve"], "args": ["M", "-pp", "64"]}]},
    }
    unreadable = {**pod, "metadata": {"name": "unreadable", "namespace": "rebel100"}, "spec": {"containers": [
        {"name": "e", "command": ["vllm", "serve"], "args": ["M", "--data-parallel-size-local", "x", "-pp", "64"]}
    ]}}  # fmt: skip

    def first(m):
        m[:0] = [unreadable, pod]

    found = run_policy("parallelism-fits-model", mutate(prod, first))
    assert [(v.resource, v.message.split(":")[0]) for v in found] == [
        ("Pod/rebel100/solo", "engine container e arg --pipeline-parallel-size")
    ]


@pytest.mark.parametrize(
    "flag, value, other, other_value",
    [
        ("--pipeline-parallel-size", "four", "--data-parallel-size", "2"),
        ("--data-parallel-size", "two", "--pipeline-parallel-size", "4"),
    ],
    ids=["pp-unreadable", "dp-unreadable"],
)
def test_an_unreadable_size_is_named_and_not_read_as_more_than_one(prod, flag, value, other, other_value):
    """PP unreadable with DP 2 (or DP unreadable with PP 4): the one finding names the unreadable value; it is not
    also read as PP > 1 with DP > 1."""
    bad = mutate(
        prod,
        lambda m: set_arg(engine(m, PREFILL), flag, value),
        lambda m: set_arg(engine(m, PREFILL), other, other_value),
    )
    (violation,) = run_policy("pp-with-dp", bad)
    assert f"{flag} '{value}' is not an integer" in violation.message, violation.message


def test_a_pod_that_fills_its_node_fits_and_one_more_npu_does_not(prod):
    """DP 8 on nodes of 8 NPUs is the most that fits (npusPerNode 8); 9 does not, and the message says what to do."""
    assert run_policy("npu-devices-fit-node", mutate(prod, decode_dp(8, claim=8))) == []
    (violation,) = run_policy("npu-devices-fit-node", mutate(prod, decode_dp(16, claim=16)))
    assert "so it stays Pending. Lower the parallelism (or --data-parallel-size-local) to at most" in violation.message
    assert violation.message.endswith("have more."), violation.message


def test_without_expert_parallel_the_experts_need_not_divide(prod):
    """Decode at DP 3 (3 NPUs claimed) spreads 256 experts over 3 devices only with --enable-expert-parallel; without
    the flag each rank holds every expert, and nothing is refused."""
    without_ep = mutate(
        prod, decode_dp(3, claim=3), lambda m: set_arg(engine(m, DECODE), "--enable-expert-parallel", None)
    )
    assert run_policy("parallelism-fits-model", without_ep) == []


def test_an_engine_without_a_local_rank_needs_no_npu(prod):
    """Decode at DP 8 fills its node of 8 NPUs; a second `vllm serve` in the pod with --data-parallel-size-local 0 runs
    no rank here and needs none: 8 + 0 still fits."""

    def idle_second_engine(m):
        extra = copy.deepcopy(engine(m, DECODE))
        extra["name"] = "vllm-headless"
        set_arg(extra, "--data-parallel-size-local", "0")
        pod_spec(m, DECODE)["containers"].append(extra)

    assert run_policy("npu-devices-fit-node", mutate(prod, decode_dp(8, claim=8), idle_second_engine)) == []


def test_a_pod_without_npu_claims_is_passed_over_and_the_next_is_judged(prod):
    """A CPU copy of decode at DP 16 (no resourceClaims: not a Rebel100 pod) listed first is not judged; decode at
    DP 16 after it, claiming 16 NPUs, does not fit a node of 8."""

    def cpu_copy_first(m):
        other = cpu_copy(m, "Deployment", DECODE, "cpu-decode")
        m.insert(0, other)

    found = run_policy("npu-devices-fit-node", mutate(prod, decode_dp(16, claim=16), cpu_copy_first))
    assert [v.resource for v in found] == [DECODE_ID], found


ARGS_NEED_4 = (
    "but its args need TP 1 x PP 1 x DP-local 4 = 4 (--tensor-parallel-size, --pipeline-parallel-size, "
    "--data-parallel-size-local): every rank needs one"
)
CLAIM = f"ResourceClaimTemplate {DECODE_CLAIM} spec.spec.devices.requests[npu].exactly.count"


def gpus_instead(count):
    """Decode without its DRA claims, given `count` nvidia.com/gpu as an extended resource: no Rebel100 pod."""

    def edit(m):
        pod_spec(m, DECODE).pop("resourceClaims")
        engine(m, DECODE)["resources"] = {
            "limits": {"nvidia.com/gpu": str(count)},
            "requests": {"nvidia.com/gpu": str(count)},
        }

    return edit


def plus_one_gpu(m):
    engine(m, DECODE)["resources"]["limits"] = {"nvidia.com/gpu": "1"}


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda m: npu_request(m, DECODE_CLAIM).update(count=8),
            f"container vllm claims 8 NPUs through {CLAIM} 8 (deviceClassName npu.rebellions.ai) {ARGS_NEED_4} NPU, "
            "so the extra devices sit idle and keep other pods off the node. Set the claim count to 4 or change the "
            "parallelism.",
        ),
        (
            lambda m: npu_request(m, DECODE_CLAIM).update(count=2),
            f"container vllm claims 2 NPUs through {CLAIM} 2 (deviceClassName npu.rebellions.ai) {ARGS_NEED_4} NPU, "
            "so ranks without a device fail to start. Set the claim count to 4 or change the parallelism.",
        ),
        (
            lambda m: (npu_request(m, DECODE_CLAIM).update(count=2), plus_one_gpu(m)),
            f"container vllm claims 3 NPUs through {CLAIM} 2 (deviceClassName npu.rebellions.ai) + limits "
            f"nvidia.com/gpu 1 {ARGS_NEED_4} NPU, so ranks without a device fail to start. Set the claim count to 4 or "
            "change the parallelism.",
        ),
        (
            gpus_instead(2),
            f"container vllm claims 2 accelerators through limits nvidia.com/gpu 2 {ARGS_NEED_4} accelerator, so ranks "
            "without a device fail to start. Set limits and requests nvidia.com/gpu to 4 or change the parallelism.",
        ),
        (
            lambda m: m.remove(get(m, "ResourceClaimTemplate", DECODE_CLAIM)),
            f"container vllm: spec.resourceClaims[npu-rdma] references ResourceClaimTemplate {DECODE_CLAIM}, which is "
            "not among the resources; 0 accelerators can be read but its args need TP 1 x PP 1 x DP-local 4 = 4, and "
            "the pod cannot get the rest. Declare the claim and its ResourceClaimTemplate together.",
        ),
    ],
    ids=["npus-more", "npus-fewer", "two-sources", "gpus-fewer", "template-missing"],
)
def test_the_claim_findings_in_full(prod, edit, message):
    """4 ranks (DP-local 4) need 4 devices; the count, its sources, the unit (NPU for a Rebel100 pod, else
    accelerator), the effect and the fix as the container gives its devices."""
    (violation,) = run_policy("npu-claim-matches-parallelism", mutate(prod, edit))
    assert (violation.resource, violation.message) == (DECODE_ID, message)


def test_the_claims_are_judged_past_engines_that_cannot_be_counted(prod):
    """A copy of decode whose TP cannot be read and a CPU copy (no claims, no accelerators), listed first, are passed
    over; a copy whose claim template is made elsewhere gets its own finding; decode after them, claiming 8 for 4
    ranks, is still refused."""

    def others_first(m):
        unreadable = copy.deepcopy(get(m, "Deployment", DECODE))
        unreadable["metadata"]["name"] = "unreadable-decode"
        set_arg(unreadable["spec"]["template"]["spec"]["containers"][0], "--tensor-parallel-size", "one")
        cpu = copy.deepcopy(get(m, "Deployment", DECODE))
        cpu["metadata"]["name"] = "cpu-decode"
        cpu["spec"]["template"]["spec"].pop("resourceClaims")
        for container in cpu["spec"]["template"]["spec"]["containers"]:
            container.get("resources", {}).pop("claims", None)
        unresolved = copy.deepcopy(get(m, "Deployment", DECODE))
        unresolved["metadata"]["name"] = "unresolved-decode"
        for claim in unresolved["spec"]["template"]["spec"]["resourceClaims"]:
            claim["resourceClaimTemplateName"] = "made-elsewhere"
        m[:0] = [unreadable, cpu, unresolved]

    found = run_policy("npu-claim-matches-parallelism", mutate(prod, others_first, decode_claim_8))
    assert [v.resource for v in found] == ["Deployment/rebel100/unresolved-decode", DECODE_ID], found


def decode_claim_8(m):
    npu_request(m, DECODE_CLAIM).update(count=8)
