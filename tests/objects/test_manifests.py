"""objects/manifests.py: the plain form every manifest is written, compared and registered in, and the pieces
made of it."""

from objects.manifests import PATCH_FORCE_ANNOTATION, Child, manifest, object_meta, plain, role_and_binding


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


RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]


def test_a_role_is_granted_to_the_account_in_its_namespace():
    account = Child("app-sa", manifest("v1", "ServiceAccount", object_meta("app", "ns", {})))
    role, binding = role_and_binding(account, object_meta("reader", "ns", {"l": "v"}), RULES, role="r", binding="b")
    assert (role.resource_name, role.kind, role.name, role.manifest["rules"]) == ("r", "Role", "reader", RULES)
    assert role.manifest["metadata"]["namespace"] == "ns" and role.after == ()
    assert (binding.resource_name, binding.kind, binding.name, binding.after) == (
        "b",
        "RoleBinding",
        "reader",
        ("app-sa", "r"),
    )
    assert binding.manifest["metadata"] == role.manifest["metadata"]
    assert binding.manifest["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    assert binding.manifest["subjects"] == [{"kind": "ServiceAccount", "name": "app", "namespace": "ns"}]
    assert {role.manifest["apiVersion"], binding.manifest["apiVersion"]} == {"rbac.authorization.k8s.io/v1"}


def test_a_role_without_a_namespace_is_a_cluster_role_granted_to_the_account_of_its_own():
    account = Child("app-sa", manifest("v1", "ServiceAccount", object_meta("app", "ns", {})))
    role, binding = role_and_binding(account, object_meta("ns-reader", None, {}), RULES, role="r", binding="b")
    assert (role.kind, binding.kind) == ("ClusterRole", "ClusterRoleBinding")
    assert "namespace" not in role.manifest["metadata"] and "namespace" not in binding.manifest["metadata"]
    assert binding.manifest["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "ns-reader",
    }
    assert binding.manifest["subjects"] == [{"kind": "ServiceAccount", "name": "app", "namespace": "ns"}]
