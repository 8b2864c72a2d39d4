"""Local certificate authorities for the HTTPS targets: one the deployment is told to trust, one it is not.

Certificates are made with the clock of the test process (under `make test-shifted`, its shifted one), the
clock Tickwork checks them with. Leaves name both spellings of loopback: DNS `localhost` and IP 127.0.0.1.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = timedelta(days=30)


@dataclass(frozen=True)
class ServerCertificate:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Authority:
    """A CA: its certificate (a PEM file a deployment may trust) and what it signs with."""

    name: str
    cert_file: Path
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, name: str, directory: Path) -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        public = key.public_key()
        cert = (
            _builder(subject, subject, public)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
            .sign(key, hashes.SHA256())
        )
        cert_file = directory / f"{name.lower().replace(' ', '-')}.pem"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cls(name, cert_file, cert, key)

    def issue(self, directory: Path, host: str = "localhost", ip: str = "127.0.0.1") -> ServerCertificate:
        """A server certificate for `host` and `ip`, and its key, written beside the CA's."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
        cert = (
            _builder(subject, self.cert.subject, key.public_key())
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host), x509.IPAddress(ipaddress.ip_address(ip))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        stem = directory / f"{self.cert_file.stem}-server"
        paths = ServerCertificate(stem.with_suffix(".crt"), stem.with_suffix(".key"))
        paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        paths.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
        paths.key.chmod(0o600)
        return paths


def _builder(subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.now(timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + VALID_FOR)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )
