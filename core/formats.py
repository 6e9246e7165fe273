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
import re
from typing import Annotated, Callable, Optional

from pydantic import AfterValidator
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
    problem: Callable[[str], Optional[str]]
    # Values refused here on purpose though the server takes them (each with its reason at the check);
    # the agreement test expects the server to accept exactly these beyond `valid`.
    stricter: Callable[[str], bool] = lambda value: False
    # The whole format is stricter than the server (which validates much less): only "valid here => the
    # server accepts" is tested.
    subset_only: bool = False

    def valid(self, value: str) -> bool:
        return self.problem(value) is None

    def type(self) -> object:
        """The pydantic type: a `str` refused with the rule in words."""
        def check(value: str) -> str:
            problem = self.problem(value)
            if problem is not None:
                # The message is a template of pydantic's; braces in it would be read as fields.
                text = f"{problem}: {self.rule} ({self.source})".replace("{", "(").replace("}", ")")
                raise PydanticCustomError("kubernetes_format", text)
            return value
        check.format = self  # lets tools (the generated-config tests) find the format of a field
        return Annotated[str, AfterValidator(check)]


def _too_long(value: str, limit: int) -> Optional[str]:
    size = len(value.encode("utf-8"))
    return f"{size} characters, more than {limit}" if size > limit else None


def _first(*problems: Optional[str]) -> Optional[str]:
    return next((p for p in problems if p is not None), None)


def _matches(pattern: str, value: str, what: str) -> Optional[str]:
    return None if re.fullmatch(pattern, value) else what


# --- names and labels (pkg/api/validate/content/dns.go, kube.go, identifier.go) ---------------


def dns1123_label_problem(value: str) -> Optional[str]:
    return _first(_too_long(value, 63), _matches(_DNS1123_LABEL, value, "not a DNS-1123 label"))


def dns1123_subdomain_problem(value: str) -> Optional[str]:
    return _first(_too_long(value, 253), _matches(_DNS1123_SUBDOMAIN, value, "not a DNS-1123 subdomain"))


def dns1035_label_problem(value: str) -> Optional[str]:
    return _first(_too_long(value, 63), _matches(_DNS1035_LABEL, value, "not a DNS-1035 label"))


def label_key_problem(value: str) -> Optional[str]:
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
    return _first(_too_long(name, 63) and f"name {name!r}: {_too_long(name, 63)}",
                  _matches(_LABEL_NAME, name, f"name {name!r} has characters other than alphanumerics, '-', '_' "
                           f"and '.', or does not start and end with an alphanumeric"))


def go_lower(value: str) -> str:
    """Go's strings.ToLower (simple case mapping): Python's full mapping differs only for U+0130."""
    return value.replace("\u0130", "i").lower()


def annotation_key_problem(value: str) -> Optional[str]:
    """apimachinery pkg/api/validation/objectmeta.go ValidateAnnotations: a label key once lowercased."""
    return label_key_problem(go_lower(value))


def label_value_problem(value: str) -> Optional[str]:
    return _first(_too_long(value, 63), _matches(f"({_LABEL_NAME})?", value,
                                                 "characters other than alphanumerics, '-', '_' and '.', or does not "
                                                 "start and end with an alphanumeric"))


def env_var_name_problem(value: str) -> Optional[str]:
    """validation.IsRelaxedEnvVarName (RelaxedEnvironmentVariableValidation is GA and on in 1.35)."""
    if not value:
        return "empty"
    bad = next((c for c in value if not (" " <= c <= "~") or c == "="), None)
    return None if bad is None else f"contains {bad!r}"


def dra_attribute_problem(value: str) -> Optional[str]:
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
    return _first(_too_long(name, 32) and f"name {name!r}: {_too_long(name, 32)}",
                  _matches(_C_IDENTIFIER, name, f"name {name!r} is not a C identifier"))


def port_name_problem(value: str) -> Optional[str]:
    """validation.IsValidPortName."""
    return _first(_too_long(value, 15),
                  None if re.fullmatch(r"[-a-z0-9]+", value) else "characters other than a-z, 0-9 and '-'",
                  None if re.search(r"[a-z]", value) else "no letter",
                  "consecutive '-'" if "--" in value else None,
                  "starts or ends with '-'" if value[:1] == "-" or value[-1:] == "-" else None)


def gateway_hostname_problem(value: str) -> Optional[str]:
    if not value:
        return "empty"
    return _first(_too_long(value, GATEWAY_HOSTNAME_MAX_LENGTH),
                  _matches(GATEWAY_HOSTNAME_PATTERN[1:-1], value, "does not match the CRD's pattern"))


# --- image references (github.com/distribution/reference regexp.go) --------------------------

_ALNUM = r"[a-z0-9]+"
_PATH_COMPONENT = _ALNUM + r"(?:(?:[._]|__|[-]+)" + _ALNUM + r")*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[(?:[a-fA-F0-9:]+)\])(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}"
_REFERENCE = rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?"


def image_problem(value: str) -> Optional[str]:
    """Stricter than the API server (which wants only no surrounding whitespace): a reference a runtime
    can pull, `[registry[:port]/]path[:tag][@digest]`, path components lower case."""
    if not value:
        return "empty"
    match = re.fullmatch(_REFERENCE, value, flags=re.ASCII)
    if match is None:
        return "not an image reference"
    return _too_long(match.group("name"), 255)


# --- quantities (pkg/api/resource/quantity.go ParseQuantity, suffix.go) ----------------------

_DIGITS = "0123456789"
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INT64 = 2**63


def _split_quantity(text: str) -> Optional[tuple[bool, str, str, str, str]]:
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


def _go_parse_int64(text: str) -> Optional[int]:
    """strconv.ParseInt(text, 10, 64)."""
    if not re.fullmatch(r"[+-]?[0-9]+", text, flags=re.ASCII):
        return None
    number = int(text)
    return number if -_INT64 <= number < _INT64 else None


def quantity_value(text: str) -> Optional[decimal.Decimal]:
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
    return bool(match) and abs(int(match.group(1))) > MAX_QUANTITY_EXPONENT


def quantity_problem(text: str) -> Optional[str]:
    if text != text.strip():
        # The server trims a quantity before parsing; the stored value would then differ from the
        # program's on every update (a perpetual diff), so surrounding whitespace is refused here.
        return "surrounding whitespace"
    if quantity_value(text) is None:
        return "not a quantity"
    if _huge_exponent(text):
        return f"an exponent beyond {MAX_QUANTITY_EXPONENT} (the API server does not answer such a quantity)"
    return None


def non_negative_quantity_problem(text: str) -> Optional[str]:
    problem = quantity_problem(text)
    if problem is None and quantity_value(text) < 0:
        return "negative"
    return problem


def positive_quantity_problem(text: str) -> Optional[str]:
    problem = quantity_problem(text)
    if problem is None and quantity_value(text) <= 0:
        return "not greater than zero"
    return problem


# --- the formats --------------------------------------------------------------------------

_APIMACHINERY = "k8s.io/apimachinery v0.35.4"
_QUANTITY_RULE = ("a Kubernetes quantity is a decimal number (optional sign, digits, optional '.' and digits) "
                  "followed by nothing, a decimal suffix n u m k M G T P E, a binary suffix Ki Mi Gi Ti Pi Ei, "
                  "or an exponent e<N> / E<N>, with no spaces (e.g. 256Gi, 500m, 1e3; not 256GB)")

DNS1123_LABEL = Format(
    "DNS-1123 label", "a DNS-1123 label has at most 63 characters: lower-case letters, digits and '-', starting "
    "and ending with a letter or digit (e.g. 'my-name')",
    f"{_APIMACHINERY} pkg/api/validate/content/dns.go IsDNS1123Label", dns1123_label_problem)
DNS1123_SUBDOMAIN = Format(
    "DNS-1123 subdomain", "an object name (DNS-1123 subdomain) has at most 253 characters: dot-separated DNS-1123 "
    "labels of lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. 'my-name.v1')",
    f"{_APIMACHINERY} pkg/api/validate/content/dns.go IsDNS1123Subdomain", dns1123_subdomain_problem)
DNS1035_LABEL = Format(
    "DNS-1035 label", "a DNS-1035 label (Service name) has at most 63 characters: lower-case letters, digits and "
    "'-', starting with a letter and ending with a letter or digit",
    f"{_APIMACHINERY} pkg/util/validation/validation.go IsDNS1035Label", dns1035_label_problem)
LABEL_KEY = Format(
    "label key", "a label key (qualified name) is an optional DNS-1123 subdomain prefix and '/', then a name of "
    "1-63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit "
    "(e.g. 'example.com/my-key')",
    f"{_APIMACHINERY} pkg/api/validate/content/kube.go IsLabelKey", label_key_problem)
ANNOTATION_KEY = Format(
    "annotation key", "an annotation key is a qualified name (any case): an optional DNS subdomain prefix and '/', "
    "then a name of 1-63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
    f"{_APIMACHINERY} pkg/api/validation/objectmeta.go ValidateAnnotations", annotation_key_problem)
LABEL_VALUE = Format(
    "label value", "a label value is empty or at most 63 characters: letters, digits, '-', '_' and '.', starting "
    "and ending with a letter or digit (e.g. 'RBLN-CR13')",
    f"{_APIMACHINERY} pkg/api/validate/content/kube.go IsLabelValue", label_value_problem)
ENV_VAR_NAME = Format(
    "environment variable name", "an environment variable name is non-empty printable ASCII without '='",
    f"{_APIMACHINERY} pkg/util/validation/validation.go IsRelaxedEnvVarName", env_var_name_problem)
DRA_ATTRIBUTE = Format(
    "DRA attribute name", "a DRA attribute name (matchAttribute) is 'domain/name': the domain a DNS subdomain of at "
    "most 63 characters, the name a C identifier (letters, digits, '_', not starting with a digit) of at most 32 "
    "(e.g. 'resource.kubernetes.io/numaNode')",
    "k8s.io/kubernetes v1.35.4 pkg/apis/resource/validation validateFullyQualifiedName", dra_attribute_problem,
    # 1.35 lets any text with two or more '/' through (a TODO in its validation); no driver publishes such a name.
    stricter=lambda v: v.count("/") > 1)
PORT_NAME = Format(
    "port name", "a port name (IANA service name) has at most 15 characters: lower-case letters, digits and '-', "
    "at least one letter, no '--', not starting or ending with '-'",
    f"{_APIMACHINERY} pkg/util/validation/validation.go IsValidPortName", port_name_problem,
    # The server takes an empty name as no name (the field is optional); a name the stack writes is never empty.
    stricter=lambda v: v == "")
GATEWAY_HOSTNAME = Format(
    "Gateway hostname", "a Gateway listener hostname is a lower-case DNS name, optionally starting with '*.', of at "
    "most 253 characters (no '_', no IP address; e.g. 'api.example.com')",
    "crds/gateway.networking.k8s.io_gateways.yaml spec.listeners[].hostname", gateway_hostname_problem)
IMAGE = Format(
    "image reference", "an image reference is [registry[:port]/]path[:tag][@digest] with lower-case path components "
    "(e.g. 'ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0')",
    "github.com/distribution/reference regexp.go (the API server only refuses surrounding whitespace)", image_problem,
    subset_only=True)
def _padded_quantity(value: str) -> bool:
    return value != value.strip() and quantity_value(value.strip()) is not None


def _stricter_quantity(value: str) -> bool:
    """Refused here, taken (or never answered) by the server: surrounding spaces, an exponent beyond the bound."""
    return _padded_quantity(value) or (quantity_value(value.strip()) is not None and _huge_exponent(value))


QUANTITY = Format("quantity", _QUANTITY_RULE, f"{_APIMACHINERY} pkg/api/resource/quantity.go ParseQuantity",
                  quantity_problem, stricter=_stricter_quantity)
NON_NEGATIVE_QUANTITY = Format(
    "non-negative quantity", _QUANTITY_RULE + ", not negative (resource requests and limits, emptyDir sizeLimit)",
    f"{_APIMACHINERY} pkg/api/resource/quantity.go ParseQuantity; k8s.io/kubernetes pkg/apis/core/validation",
    non_negative_quantity_problem, stricter=lambda v: _stricter_quantity(v) and quantity_value(v.strip()) >= 0)
POSITIVE_QUANTITY = Format(
    "positive quantity", _QUANTITY_RULE + ", greater than zero (a PersistentVolumeClaim's storage request)",
    f"{_APIMACHINERY} pkg/api/resource/quantity.go ParseQuantity; k8s.io/kubernetes pkg/apis/core/validation",
    positive_quantity_problem, stricter=lambda v: _stricter_quantity(v) and quantity_value(v.strip()) > 0)

FORMATS = (DNS1123_LABEL, DNS1123_SUBDOMAIN, DNS1035_LABEL, LABEL_KEY, ANNOTATION_KEY, LABEL_VALUE, ENV_VAR_NAME,
           DRA_ATTRIBUTE, PORT_NAME, GATEWAY_HOSTNAME, IMAGE, QUANTITY, NON_NEGATIVE_QUANTITY, POSITIVE_QUANTITY)

# The pydantic types of the schema.
Dns1123Label = DNS1123_LABEL.type()
Dns1123Subdomain = DNS1123_SUBDOMAIN.type()
Dns1035Label = DNS1035_LABEL.type()
LabelKey = LABEL_KEY.type()
AnnotationKey = ANNOTATION_KEY.type()
LabelValue = LABEL_VALUE.type()
EnvVarName = ENV_VAR_NAME.type()
DraAttribute = DRA_ATTRIBUTE.type()
PortName = PORT_NAME.type()
GatewayHostname = GATEWAY_HOSTNAME.type()
Image = IMAGE.type()
Quantity = QUANTITY.type()
NonNegativeQuantity = NON_NEGATIVE_QUANTITY.type()
PositiveQuantity = POSITIVE_QUANTITY.type()
