"""The EPP's serving certificate the program makes (`router.certificate: stack`)."""

from __future__ import annotations

import base64
import datetime
import ssl
import subprocess

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from stacks.certificate import self_signed

NOW = datetime.datetime(2026, 12, 3, tzinfo=datetime.UTC)


def decoded(data: dict[str, str]) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    key = serialization.load_pem_private_key(base64.b64decode(data["tls.key"]), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return cert, key


def test_a_p256_key_and_its_self_signed_certificate_for_the_service_ten_years():
    data = self_signed("minimax-m27-epp", "rebel100", NOW)
    assert sorted(data) == ["tls.crt", "tls.key"]
    cert, key = decoded(data)
    assert key.curve.name == "secp256r1" and key.public_key() == cert.public_key()
    assert cert.issuer == cert.subject
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [
        "minimax-m27-epp",
        "minimax-m27-epp.rebel100",
        "minimax-m27-epp.rebel100.svc",
        "minimax-m27-epp.rebel100.svc.cluster.local",
    ]
    assert cert.not_valid_after_utc - NOW == datetime.timedelta(days=3650)


def test_a_tls_server_loads_the_pair(tmp_path):
    """What the EPP does with --cert-path (Go's tls.LoadX509KeyPair): here Python's ssl, and openssl's own check."""
    data = self_signed("t-epp", "t")
    for name, value in data.items():
        (tmp_path / name).write_bytes(base64.b64decode(value))
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    checked = subprocess.run(
        ["openssl", "x509", "-in", tmp_path / "tls.crt", "-noout", "-checkend", "0"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_call_makes_a_new_key():
    """So the Secret keeps the first (objects.router keep_inputs), and the program need not remember it."""
    assert self_signed("t-epp", "t")["tls.key"] != self_signed("t-epp", "t")["tls.key"]
