"""``locust-llm sim --tls``: a throw-away certificate authority and a server certificate signed by it.

The CA (``sim-ca.pem``) is what a client trusts (``--ca-bundle``); the server certificate names ``localhost``, the
loopback addresses and the listening address. Both are made fresh at each start (EC P-256, valid for a day).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["SimCertificates", "make_certificates"]


@dataclass(frozen=True)
class SimCertificates:
    ca_path: str
    cert_path: str
    key_path: str

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_path, self.key_path)
        return context


_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    key_cert_sign=True,
    crl_sign=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    encipher_only=False,
    decipher_only=False,
)


def _name(common: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "locust-llm simulator"),
            x509.NameAttribute(NameOID.COMMON_NAME, common),
        ]
    )


def _alt_names(host: str) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    addresses = {"127.0.0.1", "::1"}
    try:
        addresses.add(str(ipaddress.ip_address(host)))
    except ValueError:
        if host and host != "localhost":
            names.append(x509.DNSName(host))
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in sorted(addresses)]
    return names


def make_certificates(directory: str, host: str = "127.0.0.1") -> SimCertificates:
    """Write ``sim-ca.pem``, ``sim-cert.pem`` and ``sim-key.pem`` (mode 600) to ``directory``."""
    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("locust-llm simulator CA"))
        .issuer_name(_name("locust-llm simulator CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(_alt_names(host)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = SimCertificates(*(os.path.join(directory, n) for n in ("sim-ca.pem", "sim-cert.pem", "sim-key.pem")))
    pem = serialization.Encoding.PEM
    with open(paths.ca_path, "wb") as f:
        f.write(ca.public_bytes(pem))
    with open(paths.cert_path, "wb") as f:
        f.write(cert.public_bytes(pem))
    fd = os.open(paths.key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return paths
