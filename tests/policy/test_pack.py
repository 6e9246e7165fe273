"""The Pulumi adapters (policy/pack.py) and the command-line reading shared by every rule (policy/read/flags.py)."""

import pytest

from core.cmdline import parse_flags
from policy import catalog, pack
from policy.read.flags import VLLM_ALIASES, VLLM_BOOLEAN_FLAGS, serve_argv


@pytest.mark.parametrize(
    "token, expected",
    [
        ("kubernetes:apps/v1:Deployment", ("apps/v1", "Deployment")),
        ("kubernetes:core/v1:ConfigMap", ("v1", "ConfigMap")),
        (
            "kubernetes:inference.networking.k8s.io/v1:InferencePool",
            ("inference.networking.k8s.io/v1", "InferencePool"),
        ),
        ("kubernetes:yaml/v2:ConfigGroup", None),
        ("kubernetes:helm.sh/v4:Chart", None),
        ("pulumi:providers:kubernetes", None),
        ("aws:s3/bucket:Bucket", None),
    ],
)
def test_type_tokens(token, expected):
    assert pack.api_version_kind(token) == expected


def test_type_token_round_trips():
    for manifest in ({"apiVersion": "v1", "kind": "Service"}, {"apiVersion": "apps/v1", "kind": "Deployment"}):
        assert pack.api_version_kind(pack.type_token(manifest)) == (manifest["apiVersion"], manifest["kind"])


def test_to_manifest_keeps_what_is_applied():
    props = {
        "metadata": {"name": "x", "namespace": "n", "uid": "u", "resourceVersion": "7"},
        "spec": {"a": [1, {"b": 2}]},
        "status": {"ready": False},
        "__inputs": {"spec": {}},
    }
    assert pack.to_manifest("kubernetes:apps/v1:Deployment", props) == {
        "spec": {"a": [1, {"b": 2}]},
        "metadata": {"name": "x", "namespace": "n"},
        "apiVersion": "apps/v1",
        "kind": "Deployment",
    }


def test_every_policy_builds():
    built = pack.policies()
    assert [p.name for p in built] == [spec.name for spec in catalog.POLICIES]
    assert {type(p).__name__ for p in built} == {"ResourceValidationPolicy", "StackValidationPolicy"}


@pytest.mark.parametrize(
    "argv, flag, value",
    [
        (["M", "--block-size", "4096"], "--block-size", "4096"),
        (["M", "--block-size=4096"], "--block-size", "4096"),
        (["--enable-prefix-caching", "M", "--port", "8000"], "--enable-prefix-caching", True),
        (["M", "--max_model_len", "1024"], "--max-model-len", "1024"),
        (["M", "-tp", "2"], "--tensor-parallel-size", "2"),
        (["M", "--port", "8000", "--port", "8100"], "--port", "8100"),
    ],
)
def test_vllm_flags(argv, flag, value):
    flags = parse_flags(argv, boolean=VLLM_BOOLEAN_FLAGS, aliases=VLLM_ALIASES)
    assert flags.get(flag) == value
    assert flags.positionals[:1] == ("M",)


def test_go_flags_of_the_sidecar():
    flags = parse_flags(["-port=8000", "-vllm-port", "8200", "--secure-proxy=false"], go_style=True)
    assert flags.integer("--port") == 8000 and flags.integer("--vllm-port") == 8200
    assert not flags.has("--secure-proxy")


@pytest.mark.parametrize(
    "container, argv",
    [
        ({"command": ["vllm", "serve"], "args": ["M", "--port", "1"]}, ["M", "--port", "1"]),
        ({"command": ["/usr/local/bin/vllm"], "args": ["serve", "M"]}, ["M"]),
        (
            {"command": ["sh", "-c", "exec vllm serve M --kv-transfer-config '{\"a\": 1}'"]},
            ["M", "--kv-transfer-config", '{"a": 1}'],
        ),
        ({"command": ["python3", "-m", "http.server"]}, None),
    ],
)
def test_engine_detection(container, argv):
    assert serve_argv(container) == argv


# --- the adapters' policies as the engine calls them (issue 25: `make mutate SCOPE=policy` reads pack.py too) -------


class Args:
    """What the engine hands a policy's validate: a resource (resource policies) or all of them (stack policies)."""

    def __init__(self, config=None, **fields):
        self.__dict__.update(fields)
        self._config = config or {}

    def get_config(self):
        return self._config


def validate_of(policy):
    return getattr(policy, f"_{type(policy).__name__}__validate")


def built(name):
    return next(p for p in pack.policies() if p.name == name)


PREFILL_DP2 = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "prefill", "namespace": "rebel100", "uid": "u-1"},
    "spec": {
        "template": {
            "metadata": {"labels": {"llm-d.ai/role": "prefill"}},
            "spec": {
                "containers": [
                    {
                        "name": "vllm",
                        "command": ["vllm", "serve"],
                        "args": ["M", "--pipeline-parallel-size", "4", "--data-parallel-size", "2"],
                    }
                ]
            },
        }
    },
    "status": {"replicas": 1},
}


def test_a_resource_policy_reports_each_finding_with_its_resource_in_front():
    reported = []
    args = Args(resource_type="kubernetes:apps/v1:Deployment", props=PREFILL_DP2)
    validate_of(built("pp-with-dp"))(args, lambda message, urn: reported.append((message, urn)))
    [(message, urn)] = reported
    assert urn is None
    assert message.startswith(
        "Deployment rebel100/prefill: container vllm args --pipeline-parallel-size and --data-parallel-size: pipeline "
        "parallel size 4 together with data parallel size 2"
    )


def test_a_resource_policy_judges_with_its_config_and_skips_what_is_no_object():
    reported = []
    props = {**PREFILL_DP2, "spec": {"template": {"spec": {"containers": [
        {"name": "vllm", "command": ["vllm", "serve"], "args": ["M", "--pipeline-parallel-size", "4"]}
    ]}}}}  # fmt: skip
    policy = validate_of(built("parallelism-fits-model"))
    policy(Args(resource_type="kubernetes:apps/v1:Deployment", props=props), lambda *a: reported.append(a))
    assert reported == []  # PP 4 of the model's 62 layers
    policy(
        Args({"modelLayers": 2}, resource_type="kubernetes:apps/v1:Deployment", props=props),
        lambda *a: reported.append(a),
    )
    [(message, urn)] = reported
    assert "pipeline parallel size 4" in message and "2 layers" in message and urn is None
    validate_of(built("pp-with-dp"))(
        Args(resource_type="aws:s3/bucket:Bucket", props=PREFILL_DP2), lambda *a: reported.append(a)
    )
    assert len(reported) == 1


def test_a_stack_policy_reports_each_finding_at_the_urn_of_its_resource():
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "route", "namespace": "rebel100"},
        "spec": {
            "rules": [{"backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "p"}]}]
        },
    }
    resources = [
        Args(resource_type="kubernetes:gateway.networking.k8s.io/v1:HTTPRoute", props=route, urn="urn:route"),
        Args(resource_type="pulumi:providers:kubernetes", props={"kubeconfig": "x"}, urn="urn:provider"),
    ]
    reported = []
    validate_of(built("httproute-backend-exists"))(Args(resources=resources), lambda *a: reported.append(a))
    [(message, urn)] = reported
    assert urn == "urn:route"
    assert message.startswith("HTTPRoute rebel100/route: spec.rules[0].backendRefs[0] names InferencePool")


@pytest.mark.parametrize(
    "name, kind, level",
    [
        ("pp-with-dp", "ResourceValidationPolicy", "mandatory"),
        ("engine-spread", "ResourceValidationPolicy", "advisory"),
        ("npu-devices-fit-node", "StackValidationPolicy", "mandatory"),
        ("router-autotune-block-unit", "StackValidationPolicy", "advisory"),
    ],
)
def test_each_policy_is_built_with_its_name_description_level_and_kind(name, kind, level):
    policy = built(name)
    assert type(policy).__name__ == kind
    assert policy.description == catalog.BY_NAME[name].description
    assert policy.enforcement_level.value == level


def test_a_policy_that_reads_facts_declares_them_and_others_declare_none():
    assert built("pp-with-dp").config_schema is None
    schema = built("npu-devices-fit-node").config_schema
    assert sorted(schema.properties) == ["npuDeviceClass", "npusPerNode"]
    assert schema.properties["npusPerNode"] == {
        "type": "integer",
        "default": 8,
        "minimum": 0,
        "description": "Rebel100 cards (NPUs) per node; 4P4D places one prefill and one decode pod (4 + 4) on each "
        "node. (default from core.config.Hardware.npus_per_node)",
    }
    assert schema.properties["npuDeviceClass"] == {
        "type": "string",
        "default": "npu.rebellions.ai",
        "description": "DRA DeviceClass of the NPUs. (default from core.config.Hardware.npu_device_class)",
    }


def test_type_token_of_a_grouped_and_a_core_object():
    assert pack.type_token({"apiVersion": "apps/v1", "kind": "Deployment"}) == "kubernetes:apps/v1:Deployment"
    assert pack.type_token({"apiVersion": "v1", "kind": "Service"}) == "kubernetes:core/v1:Service"


class Unknown(dict):
    """The SDK's view of properties during preview: reading a value not known yet raises."""

    def __getitem__(self, key):
        if key in ("uid", "status"):
            raise AssertionError(f"{key} read: unknown during preview")
        return super().__getitem__(key)


def test_to_manifest_drops_the_engines_keys_at_every_depth_and_never_reads_server_fields():
    props = Unknown(
        {
            "metadata": Unknown({"name": "c", "uid": "?", "labels": {"__x": "engine's", "a": "1"}}),
            "data": {"__inner": "engine's", "a": "1"},
            "status": "?",
            "__defaults": [],
        }
    )
    assert pack.to_manifest("kubernetes:core/v1:ConfigMap", props) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "data": {"a": "1"},
        "metadata": {"name": "c", "labels": {"a": "1"}},
    }


def test_the_levels_files_and_which_stack_gets_which():
    from policy import levels

    assert levels.environment_config("dev") == levels.CONFIG_DIR / "dev.json"
    assert levels.environment_config("prod").name == "prod.json" and levels.environment_config("prod").is_file()
    assert levels.CONFIG_DIR.parent.name == "policy" and levels.CONFIG_DIR.name == "config"
    assert [levels.enforcement_environment(e) for e in ("dev", "prod", "staging", "Dev")] == [
        "dev",
        "prod",
        "prod",
        "prod",
    ]


@pytest.mark.parametrize(
    "properties, attribute, value",
    [
        ({"npusPerNode": 16.0}, "npus_per_node", 16),  # JSON numbers arrive as doubles
        ({"hbmPerChipletGib": "24"}, "hbm_per_chiplet_gib", 24.0),
        ({"npuDeviceClass": 7}, "npu_device_class", "7"),
        ({"acceleratorResources": ["nvidia.com/gpu", 3]}, "accelerator_resources", ("nvidia.com/gpu", "3")),
        ({"acceleratorDeviceClasses": ("gpu.nvidia.com",)}, "accelerator_device_classes", ("gpu.nvidia.com",)),
        ({"enforcementLevel": "advisory", "nodes": 4}, "nodes", 4),
    ],
)
def test_facts_from_a_policy_config(properties, attribute, value):
    from policy.facts import facts_from

    got = getattr(facts_from(properties), attribute)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    "properties, message",
    [
        ({"npusPerNode": 8.5}, "policy config npusPerNode: expected an integer, got 8.5"),
        (
            {"acceleratorResources": "nvidia.com/gpu"},
            "policy config acceleratorResources: expected a list of strings, got 'nvidia.com/gpu'",
        ),
        ({"acceleratorDeviceClasses": 3}, "policy config acceleratorDeviceClasses: expected a list of strings, got 3"),
    ],
)
def test_a_fact_of_the_wrong_type_is_refused_by_name(properties, message):
    from policy.facts import facts_from

    with pytest.raises(ValueError) as raised:
        facts_from(properties)
    assert str(raised.value) == message


def test_the_schema_of_facts_without_a_program_field():
    from policy.facts import ACCELERATOR_RESOURCES, schema_properties

    schema = schema_properties(("acceleratorResources", "nodes", "hbmPerChipletGib"))
    assert schema["acceleratorResources"] == {
        "type": "array",
        "default": list(ACCELERATOR_RESOURCES),
        "items": {"type": "string"},
        "description": "Extended resources (limits/requests) whose count is an engine's accelerators, e.g. "
        "nvidia.com/gpu (pack default)",
    }
    assert type(schema["acceleratorResources"]["default"]) is list  # JSON, not the tuple of the facts
    assert schema["nodes"] == {
        "type": "integer",
        "default": 0,
        "minimum": 0,
        "description": "NPU nodes of the site (hardware.nodes of the stack): autoscaled engines must fit them at their "
        "maximum; 0: not known, not checked (pack default)",
    }
    assert schema["hbmPerChipletGib"] == {
        "type": "number",
        "default": 36.0,
        "minimum": 0,
        "description": "HBM per chiplet in GiB (36 GiB HBM3E, 144 GiB per card). (default from "
        "core.config.Hardware.hbm_per_chiplet_gib)",
    }


def test_a_pack_config_file_is_read_and_a_bad_one_named(tmp_path):
    assert catalog.load_config(None) == {}
    good = tmp_path / "levels.json"
    good.write_text('{"all": "advisory", "npu-devices-fit-node": {"npusPerNode": 16}}')
    assert catalog.load_config(good) == {"all": "advisory", "npu-devices-fit-node": {"npusPerNode": 16}}
    assert catalog.load_config(str(good)) == {"all": "advisory", "npu-devices-fit-node": {"npusPerNode": 16}}
    broken = tmp_path / "broken.json"
    broken.write_text('{"all": ')
    with pytest.raises(catalog.PackConfigError, match=rf"^cannot read policy config {broken}: Expecting value"):
        catalog.load_config(broken)
    with pytest.raises(catalog.PackConfigError, match=rf"^cannot read policy config {tmp_path / 'none.json'}: "):
        catalog.load_config(tmp_path / "none.json")


def test_a_resource_policy_that_reads_facts_declares_them():
    schema = built("parallelism-fits-model").config_schema
    assert sorted(schema.properties) == ["modelExperts", "modelLayers"]
    assert schema.properties["modelLayers"]["default"] == 62 and schema.properties["modelExperts"]["default"] == 256


def test_a_stack_policy_judges_with_its_config():
    """Both engines of prod-4p4d claim 4 NPUs: they fit nodes of 8, not nodes of 2 (the config the engine hands)."""
    from core.stackfile import stack_file
    from stacks.render import render_stack_file

    manifests = render_stack_file(stack_file("prod-4p4d"), "prod-4p4d").manifests
    resources = [
        Args(resource_type=pack.type_token(m), props=m, urn=f"urn:{m['kind']}:{m['metadata']['name']}")
        for m in manifests
    ]
    policy, reported = validate_of(built("npu-devices-fit-node")), []
    policy(Args(resources=resources), lambda *a: reported.append(a))
    assert reported == []
    policy(Args({"npusPerNode": 2}, resources=resources), lambda *a: reported.append(a))
    assert sorted(urn for _, urn in reported) == [
        "urn:Deployment:minimax-m27-decode",
        "urn:Deployment:minimax-m27-prefill",
    ]
    assert all("npusPerNode 2" in message for message, _ in reported), reported


def test_with_facts_gives_each_policy_the_facts_it_reads_over_the_files():
    from policy.catalog import with_facts

    config = {
        "all": "advisory",
        "npu-devices-fit-node": "mandatory",
        "rds-memory-budget": {"enforcementLevel": "mandatory", "nvmeDrivesPerNode": 1, "hbmPerChipletGib": 24},
    }
    merged = with_facts(config, {"npusPerNode": 16, "nvmeDrivesPerNode": 4, "modelLayers": 10})
    assert merged == {
        "all": "advisory",
        "npu-devices-fit-node": {"enforcementLevel": "mandatory", "npusPerNode": 16},
        "rds-memory-budget": {"enforcementLevel": "mandatory", "nvmeDrivesPerNode": 4, "hbmPerChipletGib": 24},
        "parallelism-fits-model": {"modelLayers": 10},
        "autoscaling-fits-site": {"npusPerNode": 16},
    }
    assert config["npu-devices-fit-node"] == "mandatory"  # the file's config is left as it was
    assert with_facts(None, {}) == {}


def test_stack_values_are_the_facts_a_stack_states():
    """prod-autoscale: the reference hardware and model (core/config.py's defaults) on 4 nodes."""
    from core.stackfile import load_stack, stack_file
    from policy.facts import stack_values

    assert stack_values(load_stack(stack_file("prod-autoscale"), "prod-autoscale")) == {
        "npusPerNode": 8,
        "hbmPerChipletGib": 36.0,
        "nvmeDrivesPerNode": 2,
        "npuDeviceClass": "npu.rebellions.ai",
        "rdsChunkOverheadMib": 2.0,
        "rdsStagingBufferMib": 512.0,
        "modelLayers": 62,
        "modelExperts": 256,
        "modelMaxContext": 204800,
        "nodes": 4,
    }
    assert stack_values(load_stack(stack_file("agg"), "agg"))["nodes"] == 0  # not stated: not judged
