"""objects/kube.py: the plain form every manifest is written, compared and registered in."""

from objects.kube import PATCH_FORCE_ANNOTATION, Child, manifest, object_meta, plain


def test_plain_drops_none_orders_keys_and_makes_whole_numbers_int():
    assert list(plain({"spec": {}, "kind": "K", "zeta": 1, "apiVersion": "v1", "metadata": {}, "alpha": None})) == [
        "apiVersion",
        "kind",
        "metadata",
        "spec",
        "zeta",
    ]
    assert plain({"replicas": 4.0, "ratio": 0.5, "items": [{"b": None, "a": 2.0}]}) == {
        "items": [{"a": 2}],
        "ratio": 0.5,
        "replicas": 4,
    }


def test_object_meta_carries_the_patch_force_annotation():
    meta = object_meta("n", "ns", {"l": "v"}, {"a": "b"})
    assert meta["annotations"] == {PATCH_FORCE_ANNOTATION: "true", "a": "b"}


def test_a_child_names_its_object():
    child = Child("res", manifest("v1", "ConfigMap", object_meta("cm", "ns", {}), data={"k": "v"}))
    assert (child.kind, child.name, child.after, child.retain_on_delete, child.timeout) == (
        "ConfigMap",
        "cm",
        (),
        False,
        None,
    )
