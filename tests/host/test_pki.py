"""host/pki.py with the real openssl: a CA, a certificate it signs with the names and usages asked for, keys 0600."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from host import pki

pytestmark = pytest.mark.skipif(not shutil.which("openssl"), reason="no openssl")


def test_a_signed_certificate_verifies_against_its_ca(tmp_path):
    pki.certificate_authority(tmp_path / "ca.key", tmp_path / "ca.crt", "test-ca")
    names = ["IP:127.0.0.1", "DNS:localhost"]
    pki.sign(
        tmp_path / "ca.key",
        tmp_path / "ca.crt",
        tmp_path / "tls.key",
        tmp_path / "tls.crt",
        "server",
        usage="serverAuth,clientAuth",
        alt_names=names,
    )
    verified = subprocess.run(
        ["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt")],
        capture_output=True,
        text=True,
    )
    assert verified.returncode == 0, verified.stderr
    shown = subprocess.run(
        ["openssl", "x509", "-in", str(tmp_path / "tls.crt"), "-noout", "-text"], capture_output=True, text=True
    ).stdout
    assert "CN=server" in shown or "CN = server" in shown
    assert "IP Address:127.0.0.1" in shown and "DNS:localhost" in shown
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in shown
    assert (tmp_path / "tls.ext").read_text() == (
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n"
    )
    for key in ("ca.key", "tls.key"):
        assert (tmp_path / key).stat().st_mode & 0o077 == 0


def test_a_failing_openssl_says_which_command_and_why(tmp_path):
    with pytest.raises(pki.PkiError, match=r"^openssl x509 failed \(1\): "):
        pki.sign(tmp_path / "no.key", tmp_path / "no.crt", tmp_path / "k", tmp_path / "c.crt", "x", usage="clientAuth")
    assert (
        tmp_path / "c.ext"
    ).read_text() == "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n"
