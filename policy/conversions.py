"""Each resource's properties converted once per content, instead of once per policy.

pulumi_policy 1.21.0 (`_PolicyAnalyzerServicer`) turns a resource's properties into what a policy reads, the protobuf
Struct to a dict (`json_format.MessageToDict`), deserialised (`deserialize_properties`), then wrapped to raise on
values unknown in preview (`unknown_checking_proxy`), for every policy it runs: in `AnalyzeStack` every resource once
per stack policy, in `Analyze` once per resource policy. At 256 pools (558 resources, 31 stack policies) that and the
pack's own conversion to manifests (`pack.to_manifest`) were most of the pack's 18 s of CPU, and of a preview's wall
time, since the engine waits for each answer (docs/performance.md, issue 41).

`install()` replaces those three names in the SDK module's namespace by versions that remember their result by the
Struct's serialised bytes, and `derived()` keeps what the pack works out from such properties (the manifest) beside
them: every policy then reads the same objects, as every rule of `stacks check` reads one list of manifests
(`catalog.evaluate`), which is why a rule never changes what it reads. The same bytes are the same properties, so a
remembered result is never stale; what a policy reads and reports is what it read and reported before.

The secrets-keeping deserialisation of `Remediate` (`proxy_secrets=True`) is not shared: a remediation may change
what it is given. It still starts from the shared dict, which `deserialize_properties` only reads.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable, Hashable
from types import SimpleNamespace
from typing import Any

import pulumi_policy.policy as sdk
from google.protobuf import json_format

# Distinct property contents kept, the least recently used dropped first: a 1024-pool stack has about 2,200
# resources, and `up` sends each twice (preview, then update) when their outputs became known.
CAPACITY = 8192


@dataclasses.dataclass
class Entry:
    """One content's conversions: the dict of its Struct, the deserialised dict, the proxy, and what was derived."""

    plain: dict
    deserialized: dict | None = None
    proxy: Any = None
    derived: dict[Hashable, Any] = dataclasses.field(default_factory=dict)

    def objects(self) -> list[Any]:
        return [value for value in (self.plain, self.deserialized, self.proxy) if value is not None]


class Conversions:
    """The remembered conversions, by content; an object handed out is found again by its identity (an entry holds
    its objects alive, so an identity is never reused while it is remembered)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._entries: collections.OrderedDict[bytes, Entry] = collections.OrderedDict()
        self._owner: dict[int, bytes] = {}  # id of a handed-out object -> its content
        self._messages: collections.OrderedDict[int, tuple[Any, bytes]] = collections.OrderedDict()  # id -> key
        self._lock = threading.RLock()  # the SDK serves on a pool of threads

    def __len__(self) -> int:
        return len(self._entries)

    def _entry(self, value: Any, role: str) -> Entry | None:
        """The entry whose `role` object (plain, deserialized, proxy) `value` is, if it is one."""
        key = self._owner.get(id(value))
        entry = self._entries.get(key) if key is not None else None
        return entry if entry is not None and getattr(entry, role) is value else None

    def message_to_dict(self, message: Any, *args: Any, **kwargs: Any) -> dict:
        """`json_format.MessageToDict` of a Struct with the SDK's arguments (none), once per content."""
        if args or kwargs or message.DESCRIPTOR.full_name != "google.protobuf.Struct":
            return json_format.MessageToDict(message, *args, **kwargs)
        with self._lock:
            key = self._key(message)
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry.plain
            entry = self._entries[key] = Entry(json_format.MessageToDict(message))
            self._owner[id(entry.plain)] = key
            while len(self._entries) > self.capacity:
                _, dropped = self._entries.popitem(last=False)
                for value in dropped.objects():
                    self._owner.pop(id(value), None)
            return entry.plain

    def _key(self, message: Any) -> bytes:
        """The content of a Struct: its bytes serialised with map keys sorted, worked out once per message object (a
        request's resource is the same object for every policy that reads it, 31 in `AnalyzeStack`). The message is
        held beside its key, so its identity is not reused while remembered; requests are not changed once received."""
        known = self._messages.get(id(message))
        if known is not None and known[0] is message:
            self._messages.move_to_end(id(message))
            return known[1]
        key = message.SerializeToString(deterministic=True)  # map keys sorted: the same content, the same bytes
        self._messages[id(message)] = (message, key)
        while len(self._messages) > self.capacity:
            self._messages.popitem(last=False)
        return key

    def deserialize_properties(self, props: dict, proxy_secrets: bool = False) -> Any:
        """`deserialize_properties`, once per content for a dict this handed out (not with `proxy_secrets`)."""
        with self._lock:
            entry = None if proxy_secrets else self._entry(props, "plain")
            if entry is None:
                return DESERIALIZE(props, proxy_secrets)
            if entry.deserialized is None:
                entry.deserialized = DESERIALIZE(props)
                self._owner[id(entry.deserialized)] = self._owner[id(props)]
            return entry.deserialized

    def unknown_checking_proxy(self, props: Any) -> Any:
        """`unknown_checking_proxy`, once per content for a deserialised dict this handed out."""
        with self._lock:
            entry = self._entry(props, "deserialized")
            if entry is None:
                return PROXY(props)
            if entry.proxy is None:
                entry.proxy = PROXY(props)
                self._owner[id(entry.proxy)] = self._owner[id(props)]
            return entry.proxy

    def derived(self, props: Any, name: Hashable, compute: Callable[[], Any]) -> Any:
        """`compute()`, once per content and `name`, for a proxy this handed out (the properties a policy reads);
        called each time for any other. An exception (an unknown value in preview) is raised again each time."""
        with self._lock:
            entry = self._entry(props, "proxy")
            if entry is None:
                return compute()
            if name not in entry.derived:
                entry.derived[name] = compute()
            return entry.derived[name]


# The SDK's own functions, as it imported them.
DESERIALIZE = sdk.deserialize_properties
PROXY = sdk.unknown_checking_proxy

CONVERSIONS = Conversions()


def install(conversions: Conversions = CONVERSIONS) -> None:
    """Put the remembering conversions in pulumi_policy's servicer module (the pack process, before it serves)."""
    sdk.json_format = SimpleNamespace(MessageToDict=conversions.message_to_dict)
    sdk.deserialize_properties = conversions.deserialize_properties
    sdk.unknown_checking_proxy = conversions.unknown_checking_proxy


def derived(props: Any, name: Hashable, compute: Callable[[], Any]) -> Any:
    return CONVERSIONS.derived(props, name, compute)
