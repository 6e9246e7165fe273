"""core.retained: changes the live stack's retained volumes cannot take, refused with object, field and way forward."""

from __future__ import annotations

from core.config import StackConfig
from core.retained import Claim, claim_of, live_stack_refusals, wanted_claims

NS = "rebel100"


def deployed(cfg: StackConfig, storage_class: str = "site-shared") -> list[Claim]:
    """The volumes a deployment of `cfg` left in the cluster (the default class filled in by the API server)."""
    return [
        Claim(
            w.claim.namespace,
            w.claim.name,
            w.claim.storage_class or storage_class,
            w.claim.size,
            w.claim.access_modes,
            cfg.name,
        )
        for w in wanted_claims(cfg)
    ]


PRELOADED = Claim(NS, "model-weights", "site-shared", "600Gi", ("ReadOnlyMany",), None)


def test_the_deployed_stack_itself_passes():
    cfg = StackConfig()
    assert [w.claim.name for w in wanted_claims(cfg)] == [
        "minimax-m27-prefill-compile-cache",
        "minimax-m27-decode-compile-cache",
    ]
    assert live_stack_refusals(cfg, [*deployed(cfg), PRELOADED], set()) == []


def test_a_download_into_the_name_of_a_preloaded_pvc_is_refused():
    cfg = StackConfig.model_validate({"weights": {"source": "download"}})
    problems = live_stack_refusals(cfg, [*deployed(StackConfig()), PRELOADED], set())
    assert len(problems) == 1, problems
    assert problems[0].startswith(
        "PersistentVolumeClaim rebel100/model-weights already exists and is not made by a stack"
    )
    assert "weights.pvc: model-weights-2" in problems[0] and "weights.source: pvc" in problems[0]
    renamed = StackConfig.model_validate({"weights": {"source": "download", "pvc": "model-weights-2"}})
    assert live_stack_refusals(renamed, [*deployed(StackConfig()), PRELOADED], set()) == []


def test_a_storage_class_change_of_a_retained_volume_is_refused():
    cfg = StackConfig.model_validate({"storage": {"storageClass": "fast-nvme"}})
    problems = live_stack_refusals(cfg, deployed(StackConfig()), set())
    assert len(problems) == 2  # both compile caches
    assert problems[0].startswith(
        "PersistentVolumeClaim rebel100/minimax-m27-prefill-compile-cache: spec.storageClassName is 'site-shared'"
    )
    assert "keep storage.storageClass: site-shared" in problems[0] and "docs/recovery.md" in problems[0]


def test_a_size_change_is_refused_unless_it_grows_on_an_expandable_class():
    smaller = StackConfig.model_validate({"storage": {"compileCacheSize": "100Gi"}})
    assert "a PVC never shrinks" in live_stack_refusals(smaller, deployed(StackConfig()), {"site-shared"})[0]
    larger = StackConfig.model_validate({"storage": {"compileCacheSize": "300Gi"}})
    problems = live_stack_refusals(larger, deployed(StackConfig()), set())
    assert len(problems) == 2 and "does not allow volume expansion (allowVolumeExpansion)" in problems[0]
    assert "storage.compileCacheSize 300Gi" in problems[0]
    assert live_stack_refusals(larger, deployed(StackConfig()), {"site-shared"}) == []


def test_moving_the_namespace_away_from_the_retained_volumes_is_refused():
    cfg = StackConfig.model_validate({"namespace": "rebel100-b"})
    problems = live_stack_refusals(cfg, deployed(StackConfig()), set())
    assert len(problems) == 1 and problems[0].startswith("namespace is 'rebel100-b', but this stack's retained volumes")
    assert "keep namespace: rebel100" in problems[0]


def test_a_live_pvc_is_read_from_kubectl_json():
    item = {
        "metadata": {"name": "x", "namespace": NS, "labels": {"app.kubernetes.io/part-of": "minimax-m27"}},
        "spec": {
            "storageClassName": "site-shared",
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "200Gi"}},
        },
    }
    assert claim_of(item) == Claim(NS, "x", "site-shared", "200Gi", ("ReadWriteMany",), "minimax-m27")
