"""Each resource converted once per content (policy/conversions.py): the same properties give the same objects,
different ones never do, and the SDK's servicer module uses nothing of `json_format` but what `install` replaces."""

from __future__ import annotations

import inspect
import re

import pulumi_policy.policy as sdk
import pytest
from google.protobuf import json_format, struct_pb2
from pulumi_policy.proxy import UnknownValueError

from policy import conversions
from policy.conversions import Conversions

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's sentinel of a value unknown in preview


def struct(value: dict) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    json_format.ParseDict(value, message)
    return message


DEPLOYMENT = {"kind": "Deployment", "metadata": {"name": "decode"}, "spec": {"replicas": 2, "ports": [8000, 8200]}}


def chain(memo: Conversions, message: struct_pb2.Struct):
    """What the SDK's servicer does with a resource's properties for each policy."""
    return memo.unknown_checking_proxy(memo.deserialize_properties(memo.message_to_dict(message)))


def test_the_same_content_is_converted_once_and_read_as_before():
    memo = Conversions()
    first, second = chain(memo, struct(DEPLOYMENT)), chain(memo, struct(DEPLOYMENT))
    assert first is second  # two messages of the same content: one conversion
    assert len(memo) == 1
    assert first["spec"]["replicas"] == 2 and list(first["spec"]["ports"]) == [8000, 8200]
    assert dict(first["metadata"]) == {"name": "decode"}


def test_the_same_content_with_its_keys_in_another_order_is_the_same_content():
    """The engine marshals a map in any order, and a parsed Struct serialises its keys in the order they came."""
    keys = [f"key{n}" for n in range(60)]
    memo = Conversions()
    first = chain(memo, struct({key: n for n, key in enumerate(keys)}))
    assert chain(memo, struct({key: keys.index(key) for key in reversed(keys)})) is first


class Counted:
    """A message that counts its serialisations (a Struct's own method cannot be wrapped)."""

    def __init__(self, content: bytes) -> None:
        self.content, self.serialised = content, 0

    def SerializeToString(self, deterministic: bool = False) -> bytes:
        assert deterministic
        self.serialised += 1
        return self.content


def test_a_message_is_serialised_once_however_many_policies_read_it():
    memo = Conversions(capacity=2)
    message, twin = Counted(b"a"), Counted(b"a")
    assert [memo._key(message) for _ in range(31)] == [b"a"] * 31
    assert message.serialised == 1
    assert memo._key(twin) == b"a" and twin.serialised == 1  # another object of the same content: its own bytes
    memo._key(Counted(b"b"))  # the least recently used of the two remembered messages (message) is dropped
    memo._key(message)
    assert message.serialised == 2


def test_different_content_is_never_shared():
    memo = Conversions()
    other = {**DEPLOYMENT, "spec": {"replicas": 3, "ports": [8000, 8200]}}
    first, second = chain(memo, struct(DEPLOYMENT)), chain(memo, struct(other))
    assert first is not second
    assert (first["spec"]["replicas"], second["spec"]["replicas"]) == (2, 3)


def test_an_unknown_value_still_raises_when_read():
    memo = Conversions()
    props = chain(memo, struct({**DEPLOYMENT, "spec": {"replicas": UNKNOWN}}))
    with pytest.raises(UnknownValueError):
        props["spec"]["replicas"]


def test_the_remediation_path_gets_its_own_objects():
    """`Remediate` deserialises with `proxy_secrets`, and a remediation may change what it is given: never shared."""
    memo = Conversions()
    plain = memo.message_to_dict(struct(DEPLOYMENT))
    kept = memo.deserialize_properties(plain, True)
    assert kept is not memo.deserialize_properties(plain, True)
    assert type(kept) is type(conversions.DESERIALIZE(plain, True)) is not dict  # the secrets-keeping proxy
    assert memo.deserialize_properties(plain) is memo.deserialize_properties(plain)


def test_an_object_of_one_step_given_to_another_is_converted_as_it_is():
    memo = Conversions()
    plain = memo.message_to_dict(struct(DEPLOYMENT))
    chain(memo, struct(DEPLOYMENT))
    assert memo.unknown_checking_proxy(plain) is not memo.unknown_checking_proxy(plain)  # not the deserialised one


def test_objects_it_did_not_hand_out_are_converted_each_time():
    memo = Conversions()
    plain = json_format.MessageToDict(struct(DEPLOYMENT))
    assert memo.deserialize_properties(plain) is not memo.deserialize_properties(plain)
    deserialized = memo.deserialize_properties(memo.message_to_dict(struct(DEPLOYMENT)))
    assert memo.unknown_checking_proxy(dict(deserialized)) is not memo.unknown_checking_proxy(dict(deserialized))


def test_what_is_derived_is_worked_out_once_per_content_and_name_and_a_failure_again_each_time():
    memo = Conversions()
    props = chain(memo, struct(DEPLOYMENT))
    calls: list[str] = []

    def compute(name: str):
        calls.append(name)
        return {"from": name}

    assert memo.derived(props, "a", lambda: compute("a")) is memo.derived(props, "a", lambda: compute("a"))
    memo.derived(props, "b", lambda: compute("b"))
    assert calls == ["a", "b"]
    unknown = chain(memo, struct({"spec": {"replicas": UNKNOWN}}))
    for _ in range(2):
        with pytest.raises(UnknownValueError):
            memo.derived(unknown, "a", lambda: unknown["spec"]["replicas"])
    plain = {"spec": {}}  # not handed out by it: computed every time
    memo.derived(plain, "a", lambda: compute("plain"))
    memo.derived(plain, "a", lambda: compute("plain"))
    assert calls == ["a", "b", "plain", "plain"]


def test_the_least_recently_used_content_is_dropped_beyond_its_capacity():
    memo = Conversions(capacity=2)
    first = chain(memo, struct({"n": 1}))
    chain(memo, struct({"n": 2}))
    assert chain(memo, struct({"n": 1})) is first  # used again: now the most recent
    chain(memo, struct({"n": 3}))  # drops {"n": 2}
    assert len(memo) == 2
    assert chain(memo, struct({"n": 1})) is first
    # What was dropped is converted anew, and its old objects are no longer recognised.
    again = memo.message_to_dict(struct({"n": 2}))
    assert again == {"n": 2.0}
    assert memo.derived(first, "x", lambda: object()) is memo.derived(first, "x", lambda: object())


def test_other_messages_and_arguments_pass_through():
    from pulumi.runtime.proto import analyzer_pb2

    memo = Conversions()
    resource = struct_pb2.ListValue()
    resource.append("a")
    assert memo.message_to_dict(resource) == ["a"]
    assert memo.message_to_dict(struct({"a": 1}), preserving_proto_field_name=True) == {"a": 1.0}
    info = analyzer_pb2.PolicyInfo(policy_type=analyzer_pb2.PolicyType.POLICY_TYPE_RESOURCE)
    assert memo.message_to_dict(info, preserving_proto_field_name=True) == {"policy_type": "POLICY_TYPE_RESOURCE"}
    assert "name" in memo.message_to_dict(analyzer_pb2.AnalyzerInfo(), True)  # a positional argument: empty fields
    assert len(memo) == 0


def test_install_replaces_every_name_the_sdks_servicer_converts_with(monkeypatch):
    """pulumi_policy's servicer module reads `json_format.MessageToDict` and nothing else of json_format (the
    replacement has only that), `deserialize_properties` and `unknown_checking_proxy`: an SDK that converts
    otherwise fails here before the pack slows down or breaks."""
    source = inspect.getsource(sdk)
    assert set(re.findall(r"json_format\.(\w+)", source)) == {"MessageToDict"}
    assert re.search(r"^from \.deserialize import deserialize_properties\b", source, re.M)
    assert re.search(r"^from \.proxy import .*\bunknown_checking_proxy\b", source, re.M)
    for name in ("json_format", "deserialize_properties", "unknown_checking_proxy"):
        monkeypatch.setattr(sdk, name, getattr(sdk, name))  # put back after the test
    memo = Conversions()
    conversions.install(memo)
    props = sdk.unknown_checking_proxy(sdk.deserialize_properties(sdk.json_format.MessageToDict(struct(DEPLOYMENT))))
    assert props is chain(memo, struct(DEPLOYMENT))


def test_the_packs_manifest_is_worked_out_once_per_content(monkeypatch):
    from policy import pack

    memo = Conversions()
    monkeypatch.setattr(conversions, "CONVERSIONS", memo)
    props = chain(memo, struct({"apiVersion": "apps/v1", **DEPLOYMENT}))
    manifest = pack.manifest_of("kubernetes:apps/v1:Deployment", props)
    assert manifest == {"apiVersion": "apps/v1", **DEPLOYMENT, "spec": {"replicas": 2.0, "ports": [8000.0, 8200.0]}}
    assert pack.manifest_of("kubernetes:apps/v1:Deployment", props) is manifest
