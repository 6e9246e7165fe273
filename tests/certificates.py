"""The one value only the running program has: the EPP's serving certificate it makes (stacks/certificate.py), where
the offline render shows a placeholder. Tests that compare the two check it here, then compare the rest."""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from objects.stack import placeholder_certificate


def certificate_names(data: dict[str, str]) -> list[str]:
    """The DNS names of a kubernetes.io/tls Secret's certificate, once its key is shown to be the certificate's."""
    cert = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    key = serialization.load_pem_private_key(base64.b64decode(data["tls.key"]), password=None)
    assert key.public_key() == cert.public_key(), "the certificate's key is not the one beside it"
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


def as_rendered(manifests: Iterable[dict]) -> list[dict]:
    """Copies of what the program registered or wrote, each certificate Secret checked (a key pair naming its
    Service, `<service>-tls`) and its data replaced by the offline render's placeholder."""
    found = []
    for manifest in manifests:
        if manifest.get("type") == "kubernetes.io/tls":
            manifest = copy.deepcopy(manifest)
            meta = manifest["metadata"]
            service = meta["name"].removesuffix("-tls")
            assert f"{service}.{meta['namespace']}.svc" in certificate_names(manifest["data"]), meta["name"]
            manifest["data"] = placeholder_certificate()
        found.append(manifest)
    return found
