"""core/versions/engine.py: the engine image's facts agree with what core.serving renders."""

import pytest

from core import serving
from core.config import Engine, KvTier, StackConfig
from core.derive import derive, engine_commands
from core.versions import Version, engine, image_version


def test_every_generated_flag_has_a_fact():
    assert {f.name for f in engine.FLAGS} == set(serving.FLAG_FIELDS)


def test_every_vllm_rbln_env_name_the_render_sets_has_a_fact():
    rendered = set(serving.engine_env(Engine())) | set(serving.ENV_FIELDS)
    assert {name for name in rendered if name.startswith("VLLM_RBLN_")} == engine.env_names_read()


def test_every_connector_the_render_uses_has_a_fact():
    config = serving.kv_transfer_config(nixl=True, lmcache=True)
    assert set(serving.connector_classes(config)) == {f.name for f in engine.CONNECTORS}


@pytest.mark.parametrize("stack", [{}, {"topology": "agg", "prefill": {"replicas": 0}, "kvTier": {"mode": "off"}}])
def test_the_default_image_has_every_feature_the_stack_uses(stack):
    cfg = StackConfig.model_validate(stack)
    for command in engine_commands(cfg, derive(cfg)).values():
        used = engine.features_used(
            engine.flag_names(command.args),
            serving.connector_classes(serving.kv_transfer_in(command.args)),
            command.env,
        )
        assert used and all(f.since <= engine.TARGET for f in used)
    assert image_version(cfg.engine.image) == engine.TARGET


def test_releases_are_ordered_and_the_target_pins_lmcache_rbln():
    versions = [r.vllm_rbln for r in engine.RELEASES]
    assert versions == sorted(versions)
    assert engine.target_release().vllm == Version(0, 30, 0)
    assert engine.target_release().lmcache_rbln == Version(0, 12, 0)


@pytest.mark.parametrize(
    "image, lmcache",
    [
        ("rebellions/vllm-rbln:0.12.0", Version(0, 12, 0)),
        ("mirror.example:5000/rebellions/vllm-rbln:0.11.2", Version(0, 11, 2)),
        ("rebellions/vllm-rbln:latest", None),
    ],
)
def test_lmcache_rbln_is_derived_from_the_image(image, lmcache):
    assert engine.is_engine_image(image)
    assert engine.lmcache_rbln_version(image_version(image)) == lmcache


@pytest.mark.parametrize(
    "image", ["vllm/vllm-openai:v0.30.0", "registry.example/team/engine:7", "rbln/lmcache-rbln:0.12.1"]
)
def test_other_images_are_not_judged_as_vllm_rbln(image):
    assert not engine.is_engine_image(image)


def test_flag_names_take_the_long_form():
    assert engine.flag_names(["m", "--a=1", "--b_c", "2", "-tp", "4"]) == ["--a", "--b-c"]


def test_lmcache_env_is_generated_from_the_tier():
    """The LMCache names the render sets for either tier mode (the lmcache test checks them against lmcache)."""
    assert set(serving.lmcache_env(KvTier())) <= set(serving.ENV_FIELDS)
