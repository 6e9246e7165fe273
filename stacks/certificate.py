"""The EPP's serving certificate, made by the program at the first `up` (config `router.certificate: stack`).

The gateway's ext_proc client does not verify the EPP's certificate (upstream's own setup: the EPP's self-signed
one, skipped by the gateway), so what matters is that a restarted EPP need not make one: v0.10.0 makes an RSA-4096
key at every start before it listens (docs/performance.md). ECDSA P-256 takes a millisecond, so the program makes
one at every run and the Secret keeps the first (objects.router: `keep_inputs`); valid ten years, as the EPP's own.
"""

from __future__ import annotations

import base64
import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from objects.router import CERT_KEYS

VALID_DAYS = 3650


def self_signed(service: str, namespace: str, now: datetime.datetime | None = None) -> dict[str, str]:
    """A kubernetes.io/tls Secret's `data` (base64 PEM) for the EPP Service `service` in `namespace`: the
    certificate names the Service's DNS names."""
    now = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    names = [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[2])])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name) for name in names]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem_cert = cert.public_bytes(serialization.Encoding.PEM)
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {name: base64.b64encode(pem).decode() for name, pem in zip(CERT_KEYS, (pem_cert, pem_key), strict=True)}
