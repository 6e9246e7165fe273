"""Certificate authorities and the certificates they sign, made with openssl (RSA 2048, valid ten years): what a local
cluster's API server and its front proxy (scripts/cluster) and the local site's KEDA (localsite/autoscaler.py) serve
and trust. Keys are written 0600. Standard library only."""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Sequence

DAYS = "3650"


class PkiError(RuntimeError):
    """openssl failed: which command, its exit status and what it said."""


def openssl(*args: str) -> None:
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise PkiError(f"openssl {args[0]} failed ({proc.returncode}): {(proc.stdout + proc.stderr).strip()}")


def certificate_authority(key: pathlib.Path, cert: pathlib.Path, subject: str) -> None:
    """A self-signed CA: its certificate `cert` (CN `subject`) and its `key`."""
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        DAYS,
        "-subj",
        f"/CN={subject}",
        "-keyout",
        str(key),
        "-out",
        str(cert),
    )
    key.chmod(0o600)


def sign(
    ca_key: pathlib.Path,
    ca_cert: pathlib.Path,
    key: pathlib.Path,
    cert: pathlib.Path,
    subject: str,
    *,
    usage: str,
    alt_names: Sequence[str] = (),
) -> None:
    """A `key` and its certificate `cert` (CN `subject`) signed by the CA: extended key `usage` (serverAuth,
    clientAuth or both), the subject alternative names `alt_names` (`IP:127.0.0.1`, `DNS:localhost`); the request
    (.csr) and the extensions (.ext) are left beside the certificate, the CA's serial beside its certificate."""
    extensions = cert.with_suffix(".ext")
    request = cert.with_suffix(".csr")
    names = f"subjectAltName={','.join(alt_names)}\n" if alt_names else ""
    extensions.write_text(f"{names}extendedKeyUsage={usage}\nkeyUsage=digitalSignature,keyEncipherment\n")
    subj = f"/CN={subject}"
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subj, "-keyout", str(key), "-out", str(request))
    openssl(
        "x509",
        "-req",
        "-in",
        str(request),
        "-CA",
        str(ca_cert),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        DAYS,
        "-extfile",
        str(extensions),
        "-out",
        str(cert),
    )
    key.chmod(0o600)


def key_pair(key: pathlib.Path, public: pathlib.Path) -> None:
    """An RSA key and its public key (a service-account token signer's)."""
    openssl("genrsa", "-out", str(key), "2048")
    openssl("rsa", "-in", str(key), "-pubout", "-out", str(public))
    key.chmod(0o600)
