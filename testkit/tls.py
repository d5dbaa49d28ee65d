"""A throwaway CA and node certificates, made at test time (``cryptography``).

``make_pki(folder, ["n1", "n2", "n3"])`` writes ``ca.pem`` and, per node, ``<name>.pem``
and ``<name>.key``, each node certificate valid for 127.0.0.1 and localhost (or the
``hosts`` given) and signed by the CA. Keys are EC P-256: quick to make, and TLS 1.2+ takes them everywhere.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID = datetime.timedelta(days=2)


@dataclass(frozen=True)
class Pki:
    ca: str  # the CA certificate (PEM), what clients and nodes trust
    certs: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (cert PEM, key PEM)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_ca(common_name: str = "Horologe test CA") -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA certificate and its key (in memory; make_pki writes them out)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    hosts: tuple[str, ...] | list[str] = ("localhost", "127.0.0.1"),
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A server certificate for ``hosts`` (names and IP addresses), signed by the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALID)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([_alt_name(h) for h in hosts]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def make_pki(
    folder: str, names: list[str], hosts: tuple[str, ...] | list[str] = ("localhost", "127.0.0.1")
) -> Pki:
    """A CA (``ca.pem``) and a certificate and key per name, for ``hosts``, written to ``folder``."""
    os.makedirs(folder, exist_ok=True)
    ca_cert, ca_key = make_ca()
    ca = _write(os.path.join(folder, "ca.pem"), ca_cert.public_bytes(serialization.Encoding.PEM))
    certs = {}
    for name in names:
        cert, key = issue(ca_cert, ca_key, name, hosts)
        certs[name] = (
            _write(os.path.join(folder, f"{name}.pem"), cert.public_bytes(serialization.Encoding.PEM)),
            _write(os.path.join(folder, f"{name}.key"), _key_pem(key)),
        )
    return Pki(ca, certs)
