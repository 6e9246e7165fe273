from core.podenv import container_env

DATA = {"a": {"X": "a", "Y": "a"}, "b": {"Y": "b"}}


def test_envfrom_in_order_with_each_sources_prefix_then_literal_values_win():
    container = {
        "envFrom": [
            {"configMapRef": {"name": "a"}},
            {"configMapRef": {"name": "b"}},  # a later source wins over an earlier one
            {"configMapRef": {"name": "a"}, "prefix": "P_"},  # the same ConfigMap again, under its own prefix
            {"secretRef": {"name": "s"}},  # no literal value to read
            {"configMapRef": {"name": "absent"}},  # optional: adds nothing
        ],
        "env": [
            {"name": "X", "value": "literal"},
            {"name": "Z", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},  # not literal
            {"name": "N", "value": 3},
        ],
    }
    assert container_env(container, DATA.get) == {"X": "literal", "Y": "b", "P_X": "a", "P_Y": "a", "N": "3"}


def test_a_container_without_env_has_none():
    assert container_env({}, DATA.get) == {}
