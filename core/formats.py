"""The Kubernetes value formats, once: what a value must look like for the API server to take it.

Each format is a `Format` (a name, the rule in words, the source it was ported from, and a check that
returns None or what is wrong) and an `Annotated` pydantic type the schema (`core/config.py`) puts on
every field whose value lands in an object. A refusal carries the rule in words; the config gate adds
the key path and the value.

The checks are ports of Kubernetes 1.35 (k8s.io/apimachinery v0.35.4, the version of the local
cluster) and of the Gateway API CRDs vendored in `crds/`; `tests/cluster/test_formats_agree.py` sends
edge and generated values of every format to a real API server (server-side dry-run) and fails when
the server and the format disagree, so a format that Kubernetes changes or that is loosened here fails.

Where a format is deliberately stricter than the server (it must never be looser), `STRICTER` says
which values and why; the agreement test holds the server to "accepts" on exactly those.
"""

from __future__ import annotations

import dataclasses
import decimal
import difflib
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

# Go's regexp `^...$` matches the whole text (no trailing newline), so every pattern is used with
# re.fullmatch; lengths are bytes in Go, and any non-ASCII text fails the patterns anyway.
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + r"(\." + _DNS1123_LABEL + r")*"
_DNS1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_C_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
# crds/gateway.networking.k8s.io_gateways.yaml, spec.listeners[].hostname (Gateway API v1.x)
GATEWAY_HOSTNAME_PATTERN = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
GATEWAY_HOSTNAME_MAX_LENGTH = 253


@dataclasses.dataclass(frozen=True)
class Format:
    """One Kubernetes value format: `problem(value)` is None or the part of `rule` the value breaks."""

    name: str
    rule: str
    source: str
    problem: Callable[[str], str | None]
    # Values refused here on purpose though the server takes them (each with its reason at the check);
    # the agreement test expects the server to accept exactly these beyond `valid`.
    stricter: Callable[[str], bool] = lambda value: False
    # The whole format is stricter than the server (which validates much less): only "valid here => the
    # server accepts" is tested.
    subset_only: bool = False

    def valid(self, value: str) -> bool:
        return self.problem(value) is None

    def validator(self) -> AfterValidator:
        """The pydantic validator of the format's type: a `str` refused with the rule in words."""
        return AfterValidator(_Check(self))

    def type(self) -> Any:
        """The pydantic type (the module's aliases below spell it out, so type checkers see a `str`)."""
        return Annotated[str, self.validator()]


@dataclasses.dataclass(frozen=True)
class _Check:
    """A format's pydantic check; `format` lets tools (the generated-config tests) find the format of a field."""

    format: Format

    def __call__(self, value: str) -> str:
        problem = self.format.problem(value)
        if problem is not None:
            # The message is a template of pydantic's; braces in it would be read as fields.
            text = f"{problem}: {self.format.rule} ({self.format.source})".replace("{", "(").replace("}", ")")
            raise PydanticCustomError("kubernetes_format", text)
        return value


def _too_long(value: str, limit: int) -> str | None:
    size = len(value.encode("utf-8"))
    return f"{size} characters, more than {limit}" if size > limit else None


def _first(*problems: str | None) -> str | None:
    return next((p for p in problems if p is not None), None)


def _matches(pattern: str, value: str, what: str) -> str | None:
    return None if re.fullmatch(pattern, value) else what


# --- names and labels (pkg/api/validate/content/dns.go, kube.go, identifier.go) ---------------


def dns1123_label_problem(value: str) -> str | None:
    return _first(_too_long(value, 63), _matches(_DNS1123_LABEL, value, "not a DNS-1123 label"))


def dns1123_subdomain_problem(value: str) -> str | None:
    return _first(_too_long(value, 253), _matches(_DNS1123_SUBDOMAIN, value, "not a DNS-1123 subdomain"))


def dns1035_label_problem(value: str) -> str | None:
    return _first(_too_long(value, 63), _matches(_DNS1035_LABEL, value, "not a DNS-1035 label"))


def label_key_problem(value: str) -> str | None:
    """content.IsLabelKey: `[prefix/]name`, the prefix a DNS-1123 subdomain, the name 1-63 characters."""
    parts = value.split("/")
    if len(parts) > 2:
        return "more than one '/'"
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "an empty prefix before '/'"
        problem = dns1123_subdomain_problem(prefix)
        if problem:
            return f"prefix {prefix!r}: {problem}"
    name = parts[-1]
    if not name:
        return "an empty name"
    return _first(
        _too_long(name, 63) and f"name {name!r}: {_too_long(name, 63)}",
        _matches(
            _LABEL_NAME,
            name,
            f"name {name!r} has characters other than alphanumerics, '-', '_' "
            f"and '.', or does not start and end with an alphanumeric",
        ),
    )


def go_lower(value: str) -> str:
    """Go's strings.ToLower (simple case mapping): Python's full mapping differs only for U+0130."""
    return value.replace("\u0130", "i").lower()


def annotation_key_problem(value: str) -> str | None:
    """apimachinery pkg/api/validation/objectmeta.go ValidateAnnotations: a label key once lowercased."""
    return label_key_problem(go_lower(value))


def label_value_problem(value: str) -> str | None:
    return _first(
        _too_long(value, 63),
        _matches(
            f"({_LABEL_NAME})?",
            value,
            "characters other than alphanumerics, '-', '_' and '.', or does not start and end with an alphanumeric",
        ),
    )


def env_var_name_problem(value: str) -> str | None:
    """validation.IsRelaxedEnvVarName (RelaxedEnvironmentVariableValidation is GA and on in 1.35)."""
    if not value:
        return "empty"
    bad = next((c for c in value if not (" " <= c <= "~") or c == "="), None)
    return None if bad is None else f"contains {bad!r}"


def dra_attribute_problem(value: str) -> str | None:
    """k8s.io/kubernetes pkg/apis/resource/validation validateFullyQualifiedName: `domain/name`, the domain
    a DNS-1123 subdomain (once lowercased) of at most 63 characters, the name a C identifier of at most 32."""
    if "/" not in value:
        return "no 'domain/' prefix"
    domain, _, name = value.partition("/")
    if "/" in name:
        # The server (1.35) lets a second '/' through; it names no attribute a driver can publish.
        return "more than one '/'"
    if not domain:
        return "an empty domain before '/'"
    problem = _first(_too_long(domain, 63), dns1123_subdomain_problem(go_lower(domain)))
    if problem:
        return f"domain {domain!r}: {problem}"
    if not name:
        return "an empty name after '/'"
    return _first(
        _too_long(name, 32) and f"name {name!r}: {_too_long(name, 32)}",
        _matches(_C_IDENTIFIER, name, f"name {name!r} is not a C identifier"),
    )


def port_name_problem(value: str) -> str | None:
    """validation.IsValidPortName."""
    return _first(
        _too_long(value, 15),
        None if re.fullmatch(r"[-a-z0-9]+", value) else "characters other than a-z, 0-9 and '-'",
        None if re.search(r"[a-z]", value) else "no letter",
        "consecutive '-'" if "--" in value else None,
        "starts or ends with '-'" if value[:1] == "-" or value[-1:] == "-" else None,
    )


def _numeric_last_label(value: str) -> bool:
    return value.rsplit(".", 1)[-1].isdigit()


def gateway_hostname_problem(value: str) -> str | None:
    if not value:
        return "empty"
    problem = _first(
        _too_long(value, GATEWAY_HOSTNAME_MAX_LENGTH),
        _matches(GATEWAY_HOSTNAME_PATTERN[1:-1], value, "does not match the CRD's pattern"),
    )
    if problem is None and _numeric_last_label(value):
        # The CRD's pattern lets `10.0.0.1` through; the type it validates says "IPs are not allowed"
        # (sigs.k8s.io/gateway-api apis/v1 shared_types.go, type Hostname), and a name whose last label is all
        # digits is read as an address (RFC 1123 section 2.1: the highest-level label is never all-numeric).
        return "an IP address (or a name whose last label is all digits, which reads as one)"
    return problem


# --- capabilities (Linux include/uapi/linux/capability.h) -------------------------------------------

# Every capability of Linux 5.9 to 6.x (CAP_CHOWN 0 ... CAP_CHECKPOINT_RESTORE 40, CAP_LAST_CAP), in number order,
# without the CAP_ prefix: include/uapi/linux/capability.h; containerd v1.7.29 pkg/cap/cap_linux.go lists the same 41.
LINUX_CAPABILITIES = (
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
)


def capability_problem(value: str) -> str | None:
    """A capability as a container's securityContext.capabilities.add takes it: the API server takes any text; the
    runtime turns `X` into `CAP_X` (containerd v1.7.29 pkg/cri/opts/spec_opts.go WithCapabilities: "CAP_" +
    strings.ToUpper(c), whatever c starts with) and runc/crun refuse or drop a name they do not know. Any case, as
    containerd upper-cases it."""
    upper = value.upper()
    if upper.startswith("CAP_") and upper[4:] in LINUX_CAPABILITIES:
        return (
            f"written with its CAP_ prefix: containerd adds CAP_ itself and the runtime gets CAP_{upper}, which "
            f"no kernel has; write {upper[4:]!r}"
        )
    if upper == "ALL":
        return "ALL, which adds every capability (the engine would be as good as privileged); name the ones it needs"
    if upper not in LINUX_CAPABILITIES:
        close = difflib.get_close_matches(upper.removeprefix("CAP_"), LINUX_CAPABILITIES, n=1)
        return "not a Linux capability" + (f" (did you mean {close[0]!r}?)" if close else "")
    return None


# --- durations (Prometheus) ----------------------------------------------------------------------

# crds/monitoring.coreos.com_podmonitors.yaml spec.podMetricsEndpoints[].interval (monitoringv1.Duration of the
# Prometheus operator): a test reads the CRD and fails when its pattern is not this one.
PROMETHEUS_DURATION_PATTERN = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
    r"(([0-9]+)ms)?)$"
)
# github.com/prometheus/common v0.67.5 model/time.go ParseDuration: each unit in milliseconds.
_DURATION_UNITS_MS = {
    "y": 365 * 24 * 3600 * 1000,
    "w": 7 * 24 * 3600 * 1000,
    "d": 24 * 3600 * 1000,
    "h": 3600 * 1000,
    "m": 60 * 1000,
    "s": 1000,
    "ms": 1,
}
_NANOSECONDS_MAX = 2**63 - 1  # a time.Duration


def prometheus_duration_ms(value: str) -> int | None:
    """A Prometheus duration in milliseconds (`1m30s` is 90000), None when it is not one."""
    if prometheus_duration_problem(value) is not None:
        return None
    parts = re.findall(r"([0-9]+)(ms|y|w|d|h|m|s)", value)
    return sum(int(number) * _DURATION_UNITS_MS[unit] for number, unit in parts)


def duration_text(milliseconds: int) -> str:
    """Milliseconds as a Prometheus duration, largest units first (`90000` is `1m30s`, 0 is `0`)."""
    if milliseconds <= 0:
        return "0"
    parts, rest = [], milliseconds
    for unit, size in _DURATION_UNITS_MS.items():
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def prometheus_duration_problem(value: str) -> str | None:
    """What the PodMonitor CRD's pattern and Prometheus's model.ParseDuration (which reads the scrape config the
    operator writes) both accept: units in order y w d h m s ms, each at most once, or `0`; not empty (the pattern
    takes "", ParseDuration does not), no more than a time.Duration holds."""
    if value == "":
        return "empty"
    if not re.fullmatch(PROMETHEUS_DURATION_PATTERN[1:-1], value, flags=re.ASCII):
        return "not a Prometheus duration"
    total = sum(
        int(number) * _DURATION_UNITS_MS[unit] * 1_000_000
        for number, unit in re.findall(r"([0-9]+)(ms|y|w|d|h|m|s)", value)
    )
    if total > _NANOSECONDS_MAX:
        return "longer than Prometheus can hold (about 292 years)"
    return None


# --- image references (github.com/distribution/reference v0.6.0, as the kubelet reads them) ------------
# The kubelet turns a container's image into a pull with k8s.io/kubernetes pkg/util/parsers ParseImageName,
# which is reference.ParseNormalizedNamed (normalize.go) with go-digest's sha256/sha384/sha512; a reference it
# refuses is the pod's InvalidImageName. The grammar below is regexp.go's, the steps normalize.go's and
# reference.go Parse's; `ImageReference` is the one reading of a reference for the gate, the version facts
# (core.versions) and the pack.

_ALNUM = r"[a-z0-9]+"
_PATH_COMPONENT = _ALNUM + r"(?:(?:[._]|__|[-]+)" + _ALNUM + r")*"
_REMOTE_NAME = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[(?:[a-fA-F0-9:]+)\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}"
# What follows the registry host: the path, then an optional tag and digest (referencePat without the domain).
_REMOTE = re.compile(rf"(?P<path>{_REMOTE_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
_IMAGE_ID = re.compile(r"[a-f0-9]{64}")
# go-digest algorithm.go: the algorithms the kubelet registers (parsers.go imports crypto/sha256 and sha512), and
# the length of their lower-case hex encoding.
_DIGEST_HEX_LENGTH = {"sha256": 64, "sha384": 96, "sha512": 128}
_REPOSITORY_PATH_MAX = 255  # reference.go RepositoryNameTotalLengthMax, on the path (the domain not counted)
_DOCKER_HUB = ("docker.io", "index.docker.io")  # normalize.go defaultDomain, legacyDefaultDomain


@dataclasses.dataclass(frozen=True)
class ImageReference:
    """An image reference as written, read as the kubelet reads it: `domain` None when the reference names no
    registry (Docker Hub); `tag` and `digest` None when absent. With both, the runtime pulls the digest; the
    tag still names the version (`rebellions/vllm-rbln:0.12.0@sha256:...` is vllm-rbln 0.12.0)."""

    domain: str | None
    path: str
    tag: str | None
    digest: str | None

    @property
    def repository(self) -> str:
        """`[domain/]path`, as written (no `docker.io/library/` added)."""
        return f"{self.domain}/{self.path}" if self.domain else self.path

    @property
    def name(self) -> str:
        """The path's last component: `ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1` is `llm-d-routing-sidecar`."""
        return self.path.rsplit("/", 1)[-1]


def _docker_domain(value: str) -> str | None:
    """normalize.go splitDockerDomain: the first component is a registry when it is `localhost`, holds a '.' or
    ':', or has a capital letter; else the reference is Docker Hub's (None)."""
    first, slash, _ = value.partition("/")
    if not slash:
        return None
    if first == "localhost" or "." in first or ":" in first or first.lower() != first:
        return first
    return None


def _parse_image(value: str) -> ImageReference | str:
    """The reference, or what is wrong with it (the kubelet's refusal in words)."""
    if not value:
        return "empty"
    if _IMAGE_ID.fullmatch(value):
        return "a 64-digit hexadecimal string, which the runtime takes for an image ID, not a repository name"
    domain = _docker_domain(value)
    remainder = value[len(domain) + 1 :] if domain else value
    remote = remainder.split(":", 1)[0]
    if remote.lower() != remote:
        return f"repository name {remote!r} has capital letters (it must be lower case)"
    if (
        domain is not None
        and domain.lower() != domain
        and "." not in domain
        and ":" not in domain
        and domain != "localhost"
    ):
        # Taken by the kubelet (as a registry host named like that), never what is meant: Docker Hub namespaces
        # are lower case, and a registry host has a '.' or a port. Refused here on purpose.
        return (
            f"the first component {domain!r} has capital letters, so the runtime reads it as a registry host "
            f"and pulls from a machine named {domain!r} (a Docker Hub namespace is lower case)"
        )
    if domain is not None and not re.fullmatch(_DOMAIN, domain, flags=re.ASCII):
        return f"registry {domain!r} is not a host name or [IPv6 address], with an optional :port"
    match = _REMOTE.fullmatch(remainder)
    if match is None:
        return "not an image reference"
    # The kubelet names a Docker Hub image of one component `library/NAME`; the limit counts that path.
    path = match.group("path")
    path = f"library/{path}" if (domain is None or domain in _DOCKER_HUB) and "/" not in path else path
    if len(path) > _REPOSITORY_PATH_MAX:
        return f"a repository path of {len(path)} characters, more than {_REPOSITORY_PATH_MAX}"
    digest = match.group("digest")
    if digest:
        algorithm, _, encoded = digest.partition(":")
        length = _DIGEST_HEX_LENGTH.get(algorithm)
        if length is None:
            return f"digest algorithm {algorithm!r} unsupported (sha256, sha384 or sha512)"
        if len(encoded) != length or not re.fullmatch(r"[a-f0-9]+", encoded):
            return f"a {algorithm} digest is {length} lower-case hexadecimal digits"
    return ImageReference(domain, match.group("path"), match.group("tag"), digest)


def image_reference(value: str) -> ImageReference | None:
    """The reference the kubelet would pull, None when it refuses it (InvalidImageName)."""
    parsed = _parse_image(value)
    return parsed if isinstance(parsed, ImageReference) else None


def image_problem(value: str) -> str | None:
    parsed = _parse_image(value)
    return None if isinstance(parsed, ImageReference) else parsed


# --- quantities (pkg/api/resource/quantity.go ParseQuantity, suffix.go) ----------------------

_DIGITS = "0123456789"
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INT64 = 2**63


def _split_quantity(text: str) -> tuple[bool, str, str, str, str] | None:
    """parseQuantityString: (positive, value, numerator, denominator, suffix), None for ErrFormatWrong."""
    positive, pos, end = True, 0, len(text)
    if text[:1] == "-":
        positive, pos = False, 1
    elif text[:1] == "+":
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, text, text[pos:], "", ""
    num, pos = text[pos:i] or "0", i
    denom = ""
    if text[pos] == ".":
        pos += 1
        i = pos
        while i < end and text[i] in _DIGITS:
            i += 1
        if i >= end:
            return positive, text, num, text[pos:], ""
        denom, pos = text[pos:i], i
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in "eEinumkKMGTP":
        pos += 1
    if pos < end and text[pos] in "-+":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        return None
    return positive, value, num, denom, text[suffix_start:]


def _go_parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64)."""
    if not re.fullmatch(r"[+-]?[0-9]+", text, flags=re.ASCII):
        return None
    number = int(text)
    return number if -_INT64 <= number < _INT64 else None


def quantity_value(text: str) -> decimal.Decimal | None:
    """The value of a quantity as resource.ParseQuantity reads it, None where it returns an error."""
    if text == "":
        return None
    if text == "0":
        return decimal.Decimal(0)
    parts = _split_quantity(text)
    if parts is None:
        return None
    positive, value, num, denom, suffix = parts
    if suffix in _DECIMAL_SUFFIXES:
        base, exponent, binary = 10, _DECIMAL_SUFFIXES[suffix], False
    elif suffix in _BINARY_SUFFIXES:
        base, exponent, binary = 2, _BINARY_SUFFIXES[suffix], True
    elif len(suffix) > 1 and suffix[0] in "eE":
        parsed = _go_parse_int64(suffix[1:])
        if parsed is None:
            return None
        # Go converts the exponent with int32(), which wraps.
        base, exponent, binary = 10, (parsed + 2**31) % 2**32 - 2**31, False
    else:
        return None
    # The fast path reads the digits as an int64; the slow path (too many digits, or a scale below
    # nano) hands `value` to inf.Dec.SetString, which fails when it holds no digit at all ("." or "-.").
    if binary:
        fast = exponent >= 0 and not denom and 15 - len(num) - int(exponent * 3 / 10) - 1 >= 0
    else:
        fast = 18 - len(num + denom) >= 0 and exponent - len(denom) >= -9
    if not fast and not any(c in _DIGITS for c in value):
        return None
    magnitude = decimal.Decimal(f"{num}.{denom or '0'}")
    with decimal.localcontext() as context:
        context.prec = 200
        # The verdict does not depend on the size; clamping keeps absurd exponents (1e2147483647) cheap.
        amount = magnitude * (decimal.Decimal(base) ** max(-400, min(400, exponent)))
    return amount if positive else -amount


# Measured on the local 1.35.4 API server: a quantity with an exponent of 2^31 (`1e2147483648`, `1e-2147483649`)
# is never answered (504 after the server's own 60 s), while `1e9223372036854775807` is taken at once. No real
# size needs an exponent beyond this bound, so larger ones are refused here (deliberately stricter than the server).
MAX_QUANTITY_EXPONENT = 1000
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)$")


def _huge_exponent(text: str) -> bool:
    match = _EXPONENT.search(text.strip())
    return match is not None and abs(int(match.group(1))) > MAX_QUANTITY_EXPONENT


def quantity_problem(text: str) -> str | None:
    if text != text.strip():
        # The server trims a quantity before parsing; the stored value would then differ from the
        # program's on every update (a perpetual diff), so surrounding whitespace is refused here.
        return "surrounding whitespace"
    if quantity_value(text) is None:
        return "not a quantity"
    if _huge_exponent(text):
        return f"an exponent beyond {MAX_QUANTITY_EXPONENT} (the API server does not answer such a quantity)"
    return None


def non_negative_quantity_problem(text: str) -> str | None:
    problem = quantity_problem(text)
    value = quantity_value(text)
    if problem is None and value is not None and value < 0:
        return "negative"
    return problem


def positive_quantity_problem(text: str) -> str | None:
    problem = quantity_problem(text)
    value = quantity_value(text)
    if problem is None and value is not None and value <= 0:
        return "not greater than zero"
    return problem


# --- the formats --------------------------------------------------------------------------

_APIMACHINERY = "k8s.io/apimachinery v0.35.4"
_QUANTITY_RULE = (
    "a Kubernetes quantity is a decimal number (optional sign, digits, optional '.' and digits) "
    "followed by nothing, a decimal suffix n u m k M G T P E, a binary suffix Ki Mi Gi Ti Pi Ei, "
    "or an exponent e<N> / E<N>, with no spaces (e.g. 256Gi, 500m, 1e3; not 256GB)"
)

DNS1123_LABEL = Format(
    "DNS-1123 label",
    "a DNS-1123 label has at most 63 characters: lower-case letters, digits and '-', starting "
    "and ending with a letter or digit (e.g. 'my-name')",
    f"{_APIMACHINERY} pkg/api/validate/content/dns.go IsDNS1123Label",
    dns1123_label_problem,
)
DNS1123_SUBDOMAIN = Format(
    "DNS-1123 subdomain",
    "an object name (DNS-1123 subdomain) has at most 253 characters: dot-separated DNS-1123 "
    "labels of lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. 'my-name.v1')",
    f"{_APIMACHINERY} pkg/api/validate/content/dns.go IsDNS1123Subdomain",
    dns1123_subdomain_problem,
)
DNS1035_LABEL = Format(
    "DNS-1035 label",
    "a DNS-1035 label (Service name) has at most 63 characters: lower-case letters, digits and "
    "'-', starting with a letter and ending with a letter or digit",
    f"{_APIMACHINERY} pkg/util/validation/validation.go IsDNS1035Label",
    dns1035_label_problem,
)
LABEL_KEY = Format(
    "label key",
    "a label key (qualified name) is an optional DNS-1123 subdomain prefix and '/', then a name of "
    "1-63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit "
    "(e.g. 'example.com/my-key')",
    f"{_APIMACHINERY} pkg/api/validate/content/kube.go IsLabelKey",
    label_key_problem,
)
ANNOTATION_KEY = Format(
    "annotation key",
    "an annotation key is a qualified name (any case): an optional DNS subdomain prefix and '/', "
    "then a name of 1-63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
    f"{_APIMACHINERY} pkg/api/validation/objectmeta.go ValidateAnnotations",
    annotation_key_problem,
)
LABEL_VALUE = Format(
    "label value",
    "a label value is empty or at most 63 characters: letters, digits, '-', '_' and '.', starting "
    "and ending with a letter or digit (e.g. 'RBLN-CR13')",
    f"{_APIMACHINERY} pkg/api/validate/content/kube.go IsLabelValue",
    label_value_problem,
)
ENV_VAR_NAME = Format(
    "environment variable name",
    "an environment variable name is non-empty printable ASCII without '='",
    f"{_APIMACHINERY} pkg/util/validation/validation.go IsRelaxedEnvVarName",
    env_var_name_problem,
)
DRA_ATTRIBUTE = Format(
    "DRA attribute name",
    "a DRA attribute name (matchAttribute) is 'domain/name': the domain a DNS subdomain of at "
    "most 63 characters, the name a C identifier (letters, digits, '_', not starting with a digit) of at most 32 "
    "(e.g. 'resource.kubernetes.io/numaNode')",
    "k8s.io/kubernetes v1.35.4 pkg/apis/resource/validation validateFullyQualifiedName",
    dra_attribute_problem,
    # 1.35 lets any text with two or more '/' through (a TODO in its validation); no driver publishes such a name.
    stricter=lambda v: v.count("/") > 1,
)
PORT_NAME = Format(
    "port name",
    "a port name (IANA service name) has at most 15 characters: lower-case letters, digits and '-', "
    "at least one letter, no '--', not starting or ending with '-'",
    f"{_APIMACHINERY} pkg/util/validation/validation.go IsValidPortName",
    port_name_problem,
    # The server takes an empty name as no name (the field is optional); a name the stack writes is never empty.
    stricter=lambda v: v == "",
)
GATEWAY_HOSTNAME = Format(
    "Gateway hostname",
    "a Gateway listener hostname is a lower-case DNS name, optionally starting with '*.', of at "
    "most 253 characters (no '_', no IP address; e.g. 'api.example.com')",
    "crds/gateway.networking.k8s.io_gateways.yaml spec.listeners[].hostname; sigs.k8s.io/gateway-api apis/v1 "
    "shared_types.go type Hostname (IPs are not allowed)",
    gateway_hostname_problem,
    # The CRD's pattern takes `10.0.0.1`; the Gateway API says a listener hostname is never an IP.
    stricter=lambda v: bool(re.fullmatch(GATEWAY_HOSTNAME_PATTERN[1:-1], v)) and _numeric_last_label(v),
)
IMAGE = Format(
    "image reference",
    "an image reference is [registry[:port]/]path[:tag][@digest]: path components of lower-case "
    "letters and digits joined by '.', '_', '__' or '-', a tag of at most 128 letters, digits, '_', '.' and '-', a "
    "sha256/sha384/sha512 digest in lower-case hex; a registry is a host with a '.' or a port, or localhost "
    "(e.g. 'ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0', 'rebellions/vllm-rbln:0.12.0@sha256:<64 hex>')",
    "github.com/distribution/reference v0.6.0 ParseNormalizedNamed, as the kubelet reads it (k8s.io/kubernetes v1.35.4 "
    "pkg/util/parsers; InvalidImageName otherwise; the API server only refuses surrounding whitespace)",
    image_problem,
    subset_only=True,
)


def _padded_quantity(value: str) -> bool:
    return value != value.strip() and quantity_value(value.strip()) is not None


def _stricter_quantity(value: str) -> bool:
    """Refused here, taken (or never answered) by the server: surrounding spaces, an exponent beyond the bound."""
    return _padded_quantity(value) or (quantity_value(value.strip()) is not None and _huge_exponent(value))


QUANTITY = Format(
    "quantity",
    _QUANTITY_RULE,
    f"{_APIMACHINERY} pkg/api/resource/quantity.go ParseQuantity",
    quantity_problem,
    stricter=_stricter_quantity,
)
NON_NEGATIVE_QUANTITY = Format(
    "non-negative quantity",
    _QUANTITY_RULE + ", not negative (resource requests and limits, emptyDir sizeLimit)",
    f"{_APIMACHINERY} pkg/api/resource/quantity.go ParseQuantity; k8s.io/kubernetes pkg/apis/core/validation",
    non_negative_quantity_problem,
    stricter=lambda v: _stricter_quantity(v) and (q := quantity_value(v.strip())) is not None and q >= 0,
)
POSITIVE_QUANTITY = Format(
    "positive quantity",
    _QUANTITY_RULE + ", greater than zero (a PersistentVolumeClaim's storage request)",
    f"{_APIMACHINERY} pkg/api/resource/quantity.go ParseQuantity; k8s.io/kubernetes pkg/apis/core/validation",
    positive_quantity_problem,
    stricter=lambda v: _stricter_quantity(v) and (q := quantity_value(v.strip())) is not None and q > 0,
)

# Not read by the API server (which takes any capability name and, for a PodMonitor, the pattern alone): their
# consumers are the container runtime and Prometheus, and tests/core/test_formats.py holds their tables.
CAPABILITY = Format(
    "Linux capability",
    "a capability is one of the Linux capability names of linux/capability.h without CAP_ "
    "(e.g. 'IPC_LOCK', 'NET_BIND_SERVICE')",
    "include/uapi/linux/capability.h; containerd v1.7.29 pkg/cri/opts/spec_opts.go WithCapabilities",
    capability_problem,
    subset_only=True,
)
PROMETHEUS_DURATION = Format(
    "Prometheus duration",
    "a Prometheus duration is 0 or numbers with units in this order, each at most once: y w d "
    "h m s ms (e.g. '30s', '1m30s', '1h')",
    "crds/monitoring.coreos.com_podmonitors.yaml spec.podMetricsEndpoints[].interval; github.com/prometheus/common "
    "model/time.go ParseDuration",
    prometheus_duration_problem,
    subset_only=True,
)

FORMATS = (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    DNS1035_LABEL,
    LABEL_KEY,
    ANNOTATION_KEY,
    LABEL_VALUE,
    ENV_VAR_NAME,
    DRA_ATTRIBUTE,
    PORT_NAME,
    GATEWAY_HOSTNAME,
    IMAGE,
    QUANTITY,
    NON_NEGATIVE_QUANTITY,
    POSITIVE_QUANTITY,
)

# The pydantic types of the schema.
Dns1123Label = Annotated[str, DNS1123_LABEL.validator()]
Dns1123Subdomain = Annotated[str, DNS1123_SUBDOMAIN.validator()]
Dns1035Label = Annotated[str, DNS1035_LABEL.validator()]
LabelKey = Annotated[str, LABEL_KEY.validator()]
AnnotationKey = Annotated[str, ANNOTATION_KEY.validator()]
LabelValue = Annotated[str, LABEL_VALUE.validator()]
EnvVarName = Annotated[str, ENV_VAR_NAME.validator()]
DraAttribute = Annotated[str, DRA_ATTRIBUTE.validator()]
PortName = Annotated[str, PORT_NAME.validator()]
GatewayHostname = Annotated[str, GATEWAY_HOSTNAME.validator()]
Image = Annotated[str, IMAGE.validator()]
Capability = Annotated[str, CAPABILITY.validator()]
PrometheusDuration = Annotated[str, PROMETHEUS_DURATION.validator()]
Quantity = Annotated[str, QUANTITY.validator()]
NonNegativeQuantity = Annotated[str, NON_NEGATIVE_QUANTITY.validator()]
PositiveQuantity = Annotated[str, POSITIVE_QUANTITY.validator()]
# A port an object carries (a container's, a Service's, a Gateway listener's): k8s.io/apimachinery v0.35.4
# pkg/util/validation/validation.go IsValidPortNum. The schema narrows the ports a user chooses further.
Port = Annotated[int, Field(ge=1, le=65535)]
