"""Parsing the `rebel100:` namespace: unknown keys, types and ranges, reported together with paths."""

import pytest

from core.config import StackConfig
from core.gate import ConfigError, load_config
from tests.conftest import stack_config, stack_file_refusals


def problems(config):
    with pytest.raises(ConfigError) as info:
        load_config(config)
    return [str(issue) for issue in info.value.issues]


def test_defaults_are_the_target_configuration():
    cfg = StackConfig()
    assert (cfg.prefill.replicas, cfg.prefill.pipeline_parallel_size, cfg.prefill.data_parallel_size) == (4, 4, 1)
    assert (cfg.decode.replicas, cfg.decode.data_parallel_size, cfg.decode.enable_expert_parallel) == (4, 4, True)
    assert cfg.decode.max_num_seqs == 1 and cfg.prefill.max_num_seqs == 4
    assert cfg.prefill.gpu_memory_utilization == 0.8 and cfg.decode.gpu_memory_utilization is None
    assert (cfg.engine.block_size, cfg.engine.max_model_len, cfg.engine.max_num_batched_tokens) == (4096, 204800, 512)
    assert cfg.engine.kv_cache_dtype == "fp8" and cfg.engine.sub_block_cache
    assert cfg.kv_tier.mode == "rds" and cfg.kv_tier.rds_max_chunks == 1000 and cfg.kv_tier.chunk_size == 4096
    assert cfg.router.peak_prefill_throughput == 2256
    # Where the reference design has autoTune read 4096 from vllm-rbln, the render says 4096 (docs/decisions.md).
    assert not cfg.router.auto_tune and cfg.router.block_size_tokens == 4096
    assert cfg.hardware.rdma_nics_per_pod == 2 and cfg.hardware.npus_per_node == 8


def test_every_field_has_a_description():
    def walk(model):
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name} has no description"
            annotation = info.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                walk(annotation)

    walk(StackConfig)


def test_stack_files_load():
    for stack in ("dev", "prod-4p4d", "agg", "pd-router07"):
        load_config(stack_config(stack))


def test_unknown_top_level_key_suggests_closest():
    found = problems({"rebel100:prefil": '{"replicas": 1}'})
    assert found == [
        "rebel100:prefil: unknown key. Did you mean `rebel100:prefill`? Valid keys here: "
        + found[0].split("Valid keys here: ")[1]
    ]


def test_unknown_nested_key_names_full_path():
    found = problems({"rebel100:decode": '{"maxNumSeq": 8}'})
    assert len(found) == 1
    assert found[0].startswith("rebel100:decode.maxNumSeq: unknown key. Did you mean `rebel100:decode.maxNumSeqs`?")


def test_wrong_type_and_range_name_path_value_and_range():
    found = problems({"rebel100:prefill": '{"replicas": -1, "maxNumSeqs": "many"}', "rebel100:topology": "mesh"})
    assert len(found) == 3  # all reported together
    text = "\n".join(found)
    assert "rebel100:prefill.replicas: -1 is not valid" in text and "allowed: >= 0 and <= 1024" in text
    assert (
        'rebel100:prefill.maxNumSeqs: "many" is text, but prefill.maxNumSeqs takes an int (allowed: >= 1 and <= 1024): '
        "a whole number without quotes (`4`), not a boolean, a quoted number or a fraction. Write a whole number in "
        "its place, e.g. `maxNumSeqs: 4`." in text
    )
    assert "rebel100:topology: 'mesh' is not valid" in text and "allowed: 'pd', 'agg'" in text


def test_other_namespaces_and_the_secret_are_ignored():
    cfg = load_config({"kubernetes:context": "x", "rebel100:hfToken": "[secret]"})
    assert cfg.namespace == "rebel100"


def test_scalars_arrive_as_text():
    cfg = load_config({"rebel100:environment": "dev", "rebel100:renderDirectory": "build/x"})
    assert cfg.environment == "dev" and cfg.render_directory == "build/x"


# --- the wording of schema errors, each part by hand ----------------------------------------------


def test_unknown_key_without_a_close_match_lists_the_valid_keys_only():
    found = problems({"rebel100:kvTier": '{"zzzz": 1}'})
    assert found == [
        "rebel100:kvTier.zzzz: unknown key. Valid keys here: chunkSize, cpuSizeGib, enableKvEvents, "
        "extraConfig, hashAlgorithm, mode, rdsChunkOverheadMib, rdsDrives, rdsMaxChunks, stagingBufferMib."
    ]


def test_secret_keys_are_valid_at_the_top_level_only():
    top = problems({"rebel100:zzzz": "1"})[0]
    assert "hfToken" in top.split("Valid keys here: ")[1]
    nested = problems({"rebel100:decode": '{"zzzz": 1}'})[0]
    assert "hfToken" not in nested and "maxNumSeqs" in nested


def test_every_unknown_key_is_reported():
    found = problems({"rebel100:decode": '{"zzzz": 1, "yyyy": 2}', "rebel100:prefil": "{}"})
    assert sorted(f.split(":", 2)[1] for f in found) == ["decode.yyyy", "decode.zzzz", "prefil"]


def test_bounds_of_a_nested_section_and_list_positions():
    found = problems(
        {
            "rebel100:decode": '{"sidecar": {"port": 80}, "extraArgs": [1]}',
            "rebel100:kvTier": '{"rdsChunkOverheadMib": 0}',
        }
    )
    text = "\n".join(found)
    assert (
        "rebel100:decode.sidecar.port: 80 is not valid: Input should be greater than or equal to 1024. "
        "(allowed: >= 1024 and <= 65000)" in text
    )
    assert (
        "rebel100:decode.extraArgs[0]: 1 is a whole number, but decode.extraArgs[0] takes a str: text (quote a value "
        'YAML reads as a number or a boolean: `cpu: "32"`). Quote it: `- "1"`.' in text
    )
    assert "rebel100:kvTier.rdsChunkOverheadMib: 0 is not valid: Input should be greater than 0. (allowed: > 0)" in text


def test_a_field_without_bounds_says_no_allowed_range():
    found = problems({"rebel100:engine": '{"subBlockCache": "maybe"}', "rebel100:decode": '{"extraArgs": "--x"}'})
    assert sorted(found) == [
        "rebel100:decode.extraArgs: '--x' is not valid: Input should be a valid list.",
        'rebel100:engine.subBlockCache: "maybe" is text, but engine.subBlockCache takes a bool: `true` or `false` '
        "without quotes (`yes`, `no`, `on` and `off` are strings to the Pulumi CLI's YAML). Write true or false in "
        "its place, e.g. `subBlockCache: true`.",
    ]


def test_allowed_text_of_each_bound_and_pattern():
    from typing import Literal

    from pydantic import BaseModel, Field

    from core.gate.parse import _allowed

    class Bounds(BaseModel):
        open_range: float = Field(1.0, gt=0, lt=2)
        closed_range: int = Field(1, ge=1, le=8)
        revision: str = Field("a", pattern=r"^[a-z]+$")
        choice: Literal["x", "y"] | None = None
        free: str = "s"

    fields = Bounds.model_fields
    assert _allowed(fields["open_range"]) == "allowed: > 0 and < 2"
    assert _allowed(fields["closed_range"]) == "allowed: >= 1 and <= 8"
    assert _allowed(fields["revision"]) == "allowed: matching ^[a-z]+$"
    assert _allowed(fields["choice"]) == "allowed: 'x', 'y'"
    assert _allowed(fields["free"]) == ""
    assert _allowed(None) == ""


def test_bounds_of_a_section_two_levels_down():
    found = problems({"rebel100:engine": '{"speculative": {"numSpeculativeTokens": 99}}'})
    assert found == [
        "rebel100:engine.speculative.numSpeculativeTokens: 99 is not valid: Input should be less than or "
        "equal to 16. (allowed: >= 1 and <= 16)"
    ]


def test_a_value_inside_a_mapping_has_no_section():
    from core.gate.parse import _field_info, _field_models

    assert _field_models(StackConfig, ("prefill", "extraEnv")) is None  # a dict, not a section
    assert _field_models(StackConfig, ("prefill", "extraEnv", "X")) is None
    assert _field_info(StackConfig, ("prefill", "extraEnv", "X")) is None
    assert problems({"rebel100:prefill": '{"extraEnv": {"X": 1}}'}) == [
        "rebel100:prefill.extraEnv.X: 1 is a whole number, but prefill.extraEnv.X takes a str: text (quote a value "
        'YAML reads as a number or a boolean: `cpu: "32"`). Quote it: `X: "1"`.'
    ]


def test_unknown_key_two_levels_down_lists_that_sections_keys():
    assert problems({"rebel100:engine": '{"speculative": {"zzzz": 1}}'}) == [
        "rebel100:engine.speculative.zzzz: unknown key. Valid keys here: method, model, numSpeculativeTokens."
    ]


# --- sections spelled by field name, and map keys that look like pydantic's `[key]` (issue 25) ----------------


def test_an_unknown_key_in_a_section_spelled_in_snake_case_lists_that_sections_keys():
    """populate_by_name accepts `kv_tier` for `kvTier`, so its unknown key is judged against KvTier's fields. Before,
    the lookup knew only `kvTier`: the message listed no key at all ("Valid keys here: .")."""
    assert problems({"rebel100:kv_tier": '{"rdsMaxChunk": 1}'}) == [
        "rebel100:kv_tier.rdsMaxChunk: unknown key. Did you mean `rebel100:kv_tier.rdsMaxChunks`? Valid keys here: "
        "chunkSize, cpuSizeGib, enableKvEvents, extraConfig, hashAlgorithm, mode, rdsChunkOverheadMib, rdsDrives, "
        "rdsMaxChunks, stagingBufferMib."
    ]


def test_a_bad_value_under_a_map_key_spelled_like_pydantics_key_marker_is_reported_at_that_key():
    """pydantic ends the loc of a map key's own error with `[key]`; a key the user spelled `[key]` (a valid
    environment variable name) whose value is wrong ends the same way, one part higher. It is that key's value that
    is wrong, reported at decode.extraEnv.[key], not 'key extraEnv' at decode."""
    assert problems({"rebel100:decode": '{"extraEnv": {"[key]": 5}}'}) == [
        "rebel100:decode.extraEnv.[key]: 5 is a whole number, but decode.extraEnv.[key] takes a str: text (quote a "
        'value YAML reads as a number or a boolean: `cpu: "32"`). Quote it: `[key]: "5"`.'
    ]
    assert problems({"rebel100:prefill": '{"extraEnv": {"[key]": 5, "A=B": "x"}}'}) == [
        "rebel100:prefill.extraEnv.[key]: 5 is a whole number, but prefill.extraEnv.[key] takes a str: text (quote a "
        'value YAML reads as a number or a boolean: `cpu: "32"`). Quote it: `[key]: "5"`.',
        "rebel100:prefill.extraEnv: key 'A=B' is not valid: contains '=': an environment variable name is non-empty "
        "printable ASCII without '=' (k8s.io/apimachinery v0.35.4 pkg/util/validation/validation.go "
        "IsRelaxedEnvVarName).",
    ]


def test_is_map_names_the_map_fields_only():
    from core.gate.parse import _is_map

    assert (
        _is_map(("decode", "extraEnv"))
        and _is_map(("engine", "podAnnotations"))
        and _is_map(("kv_tier", "extra_config"))
    )
    assert not _is_map(("decode",)) and not _is_map(("decode", "replicas")) and not _is_map(())
    assert not _is_map(("decode", "extraEnv", "[key]"))


# --- strict types, in stack files written as a user writes them (issue 38) ----------------------------------------

INT_RULE = "a whole number without quotes (`4`), not a boolean, a quoted number or a fraction."
FLOAT_RULE = "a number without quotes (`0.8`, `2`), not a boolean or a quoted number."
BOOL_RULE = "`true` or `false` without quotes (`yes`, `no`, `on` and `off` are strings to the Pulumi CLI's YAML)."
STR_RULE = 'text (quote a value YAML reads as a number or a boolean: `cpu: "32"`).'


@pytest.mark.parametrize(
    "text, path, message",
    [
        (
            "rebel100:prefill:\n  replicas: true\n",
            "rebel100:prefill.replicas",
            "true is a boolean, but prefill.replicas takes an int (allowed: >= 0 and <= 1024): "
            f"{INT_RULE} Write a whole number in its place, e.g. `replicas: 4`.",
        ),
        (
            "rebel100:decode:\n  autoscaling: {minReplicas: 1, maxReplicas: true}\n",
            "rebel100:decode.autoscaling.maxReplicas",
            "true is a boolean, but decode.autoscaling.maxReplicas takes an int (allowed: >= 1 and <= 1024): "
            f"{INT_RULE} Write a whole number in its place.",
        ),
        (
            'rebel100:decode:\n  autoscaling: {minReplicas: 1, maxReplicas: "4"}\n',
            "rebel100:decode.autoscaling.maxReplicas",
            '"4" is a quoted number (text), but decode.autoscaling.maxReplicas takes an int (allowed: >= 1 and <= '
            f"1024): {INT_RULE} Write it without the quotes: `maxReplicas: 4`.",
        ),
        (
            "rebel100:decode:\n  maxNumSeqs: 4.5\n",
            "rebel100:decode.maxNumSeqs",
            "4.5 is a number with a fraction, but decode.maxNumSeqs takes an int (allowed: >= 1 and <= 1024): "
            f"{INT_RULE} Write a whole number in its place, e.g. `maxNumSeqs: 1`.",
        ),
        (
            'rebel100:prefill:\n  gpuMemoryUtilization: "0.8"\n',
            "rebel100:prefill.gpuMemoryUtilization",
            f'"0.8" is a quoted number (text), but prefill.gpuMemoryUtilization takes a float: {FLOAT_RULE} Write it '
            "without the quotes: `gpuMemoryUtilization: 0.8`.",
        ),
        (
            "rebel100:hardware:\n  hbmPerChipletGib: true\n",
            "rebel100:hardware.hbmPerChipletGib",
            f"true is a boolean, but hardware.hbmPerChipletGib takes a float (allowed: > 0): {FLOAT_RULE} Write a "
            "number in its place, e.g. `hbmPerChipletGib: 36.0`.",
        ),
        (
            "rebel100:engine:\n  subBlockCache: yes\n",
            "rebel100:engine.subBlockCache",
            f'"yes" is text, but engine.subBlockCache takes a bool: {BOOL_RULE} Write true or false in its place, '
            "e.g. `subBlockCache: true`.",
        ),
        (
            'rebel100:weights:\n  gated: "true"\n',
            "rebel100:weights.gated",
            f'"true" is a quoted boolean (text), but weights.gated takes a bool: {BOOL_RULE} Write it without the '
            "quotes: `gated: true`.",
        ),
        (
            "rebel100:storage:\n  retainOnDelete: 1\n",
            "rebel100:storage.retainOnDelete",
            f"1 is a whole number, but storage.retainOnDelete takes a bool: {BOOL_RULE} Write true or false in its "
            "place, e.g. `retainOnDelete: true`.",
        ),
        (
            "rebel100:decode:\n  resources: {cpu: 32}\n",
            "rebel100:decode.resources.cpu",
            f'32 is a whole number, but decode.resources.cpu takes a str: {STR_RULE} Quote it: `cpu: "32"`.',
        ),
        (
            "rebel100:decode:\n  extraArgs: [--enforce-eager, 5]\n",
            "rebel100:decode.extraArgs[1]",
            f'5 is a whole number, but decode.extraArgs[1] takes a str: {STR_RULE} Quote it: `- "5"`.',
        ),
    ],
)
def test_a_value_of_another_kind_is_refused_at_its_key_with_the_type(tmp_path, text, path, message):
    assert stack_file_refusals(tmp_path, text) == [(path, message, "")]


@pytest.mark.parametrize(
    "text",
    [
        # yaml.v3 and the CLI write 4.0 as 4 and 0x4 as 4: the program reads an int.
        "rebel100:decode:\n  maxNumSeqs: 4.0\n",
        "rebel100:decode:\n  maxNumSeqs: 0x4\n",
        # A float key takes a whole number (`36` is 36 GiB), and any float.
        "rebel100:hardware:\n  hbmPerChipletGib: 36\n",
        "rebel100:prefill:\n  gpuMemoryUtilization: 0.85\n",
        # Top-level keys reach the program as text whatever YAML made of them (the CLI's config.Value).
        "rebel100:renderDirectory: 2024\n",
        'rebel100:decode:\n  resources: {cpu: "32"}\n  maxNumSeqs: 8\n',
    ],
)
def test_values_of_the_right_kind_pass(tmp_path, text):
    assert stack_file_refusals(tmp_path, text) == []


def test_the_shipped_stacks_and_the_documented_example_load(tmp_path):
    """Every Pulumi.*.yaml of the project, and the autoscaling example of docs/what-it-deploys.md as a stack file."""
    from core import stackfile

    for name in stackfile.available_stacks():
        stackfile.load_stack(stackfile.stack_file(name), name)
    page = (stackfile.PROJECT_ROOT / "docs" / "what-it-deploys.md").read_text()
    example = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "Pulumi.example.yaml"
    path.write_text(example)
    stackfile.load_stack(path, "example")


def test_parallelism_beyond_what_a_node_holds_is_refused_at_once(tmp_path):
    """A pod's NPUs fit one node (at most 64): TP, PP and DP-local above 64, or a DP of a billion, are refused by the
    schema, before the ports and device lists derived from them are built (a billion ranks hung the gate)."""
    text = """\
        rebel100:prefill:
          tensorParallelSize: 1000000000
        rebel100:decode:
          dataParallelSize: 1000000000
          dataParallelSizeLocal: 65
          pipelineParallelSize: 65
    """
    assert [(path, message.split(":")[0]) for path, message, _ in stack_file_refusals(tmp_path, text)] == [
        ("rebel100:prefill.tensorParallelSize", "1000000000 is not valid"),
        ("rebel100:decode.pipelineParallelSize", "65 is not valid"),
        ("rebel100:decode.dataParallelSize", "1000000000 is not valid"),
        ("rebel100:decode.dataParallelSizeLocal", "65 is not valid"),
    ]
