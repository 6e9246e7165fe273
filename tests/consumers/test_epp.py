"""The real llm-d EPP v0.7.1 (built by scripts/consumers) against the data-driven check (core.versions.epp_schema).

- The corpus (tests/consumers/corpus.py): the check with the v0.7.1 data and the real v0.7.1 EPP give the same
  verdict on every config. This is what makes the v0.10.0 data, which no program here can confirm in CI, a
  check of the same kind and strictness.
- The render of every stack: accepted by the check with the data of the EPP it pins (v0.10.0, or v0.7.1 for
  pd-router07), and fed to the real v0.7.1 EPP, whose verdict is what the v0.7.1 data predicts: it refuses the
  v0.10 renders (they need v0.9+) and loads pd-router07's, which follows its v0.7.1 pin (core/versions/router.py
  GENERATIONS).
"""

from __future__ import annotations

import pytest

from core.versions import Version, epp_schema, image_version, missing_features
from core.versions import router as router_versions
from tests.consumers import corpus
from tests.consumers.programs import (
    EPP_LOADED,
    STACKS,
    VERSION,
    programs_dir,
    rendered,
    rendered_epp,
    rendered_epp_image,
    run_epp,
    verdict,
)

pytestmark = pytest.mark.consumers

DATA = epp_schema.load("epp", Version.parse(VERSION))


@pytest.fixture(scope="module")
def programs():
    return programs_dir()


def predicted(config: dict, data: dict) -> str:
    return "refused" if epp_schema.check_epp_config(config, data) else "accepted"


@pytest.mark.parametrize("name", sorted(corpus.CASES))
def test_check_and_real_epp_agree_on_the_corpus(programs, name):
    note, config = corpus.CASES[name]
    outcome = run_epp(programs, config)
    assert verdict(outcome) == predicted(config, DATA), (
        f"{name} ({note}): the check says {epp_schema.check_epp_config(config, DATA)}, the EPP logged:\n"
        + "\n".join(outcome["log"][-20:])
    )


def test_corpus_has_both_verdicts():
    verdicts = [predicted(config, DATA) for _, config in corpus.CASES.values()]
    assert verdicts.count("accepted") >= 5 and verdicts.count("refused") >= 15


@pytest.fixture(scope="module", params=STACKS)
def render(request):
    manifests = rendered(request.param)
    return request.param, rendered_epp(manifests), rendered_epp_image(manifests)


def test_render_is_accepted_by_the_pinned_versions_data(render):
    stack, (config, _args), image = render
    data = epp_schema.data_for("epp", image_version(image))
    assert data is not None, (stack, image)
    assert epp_schema.check_epp_config(config, data) == [], (stack, image)


def test_real_epp_on_the_real_render_gives_the_verdict_its_data_predicts(programs, render):
    """Its command line first (a flag newer than this EPP, by core/versions/router.py's facts, ends it before the
    configuration is read), then its configuration (by the schema data of this EPP's version)."""
    stack, (config, args), _image = render
    outcome = run_epp(programs, config, args)
    missing = {f.name for f in missing_features(Version.parse(VERSION), router_versions.epp_flag_features_used(args))}
    flags = router_versions.flag_names(args)  # pflag stops at the first unknown one, in the order given
    reasons = [f"unknown flag: {name}" for name in flags if name in missing] + [
        problem.message.split(" (")[0] for problem in epp_schema.check_epp_config(config, DATA)
    ]
    assert verdict(outcome) == ("refused" if reasons else "accepted"), (stack, reasons, outcome["log"][-20:])
    if reasons:  # and for the first reason the data gives, in the program's words
        assert any(reasons[0] in line.replace('\\"', '"') for line in outcome["log"]), (reasons, outcome["log"][-10:])


def test_real_epp_loads_the_render_of_the_stack_pinned_to_it(programs):
    """pd-router07 pins this EPP's version: the render and arguments the stack gives it are read as they are."""
    manifests = rendered("pd-router07")
    assert image_version(rendered_epp_image(manifests)) == Version.parse(VERSION)
    config, args = rendered_epp(manifests)
    assert config["apiVersion"] == router_versions.generation(Version.parse(VERSION)).api_version
    assert epp_schema.check_epp_config(config, DATA) == []
    outcome = run_epp(programs, config, args)
    assert verdict(outcome) == "accepted", outcome["log"][-20:]
    assert any(EPP_LOADED in line for line in outcome["log"]), outcome["log"][-20:]
