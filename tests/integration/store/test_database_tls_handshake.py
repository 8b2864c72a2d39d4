"""sslmode=verify-full as libpq (psycopg's) really applies it to the connection string Tickwork builds.

A local server speaks the start of Postgres' protocol (answers the SSLRequest with 'S') and then TLS
with a certificate from a throwaway CA; after the handshake it hangs up. So a connection that gets past
certificate verification fails later, with a different error: the error says which side refused.
"""
from __future__ import annotations

import datetime
import queue
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tickwork.settings import AWS_POSTGRES_CA_BUNDLE, Settings
from tickwork.store.credentials import SecretCredentials

# Certificates valid from a day before the real now to a day after: TLS checks them against the real
# clock, so this is the one place a test must use it.
_NOW = datetime.datetime.now(datetime.timezone.utc)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, key: Any, issuer: str, issuer_key: Any, ca: bool, sans: list[x509.GeneralName]) -> x509.Certificate:
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(_NOW - datetime.timedelta(days=1)).not_valid_after(_NOW + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("pki")
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test root", ca_key, "test root", ca_key, True, [])
    server = _cert("localhost", server_key, "test root", ca_key, False, [x509.DNSName("localhost")])
    paths = {"ca": out / "ca.pem", "cert": out / "server.pem", "key": out / "server.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return paths


@pytest.fixture
def tls_server(pki: dict[str, Path]):
    """Accepts connections until stopped; puts whether each TLS handshake completed on a queue."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki["cert"], pki["key"])
    listener = socket.create_server(("127.0.0.1", 0))
    handshakes: queue.Queue[bool] = queue.Queue()
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                if len(conn.recv(8)) != 8:  # SSLRequest: length 8, code 80877103
                    continue
                conn.sendall(b"S")
                try:
                    with context.wrap_socket(conn, server_side=True):
                        handshakes.put(True)
                except (ssl.SSLError, OSError):
                    handshakes.put(False)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], handshakes
    stop.set()
    socket.create_connection(listener.getsockname()).close()  # wakes the accept() to see `stop`
    thread.join(timeout=10)
    listener.close()


class _Secret:
    def get(self, name: str, **_: Any) -> dict[str, str]:
        return {"username": "tickwork", "password": "pw"}


def _connect(host: str, port: int, **env: str) -> str:
    settings = Settings.from_env({"REDIS_URL": "redis://h:6379/0", "DATABASE_SECRET_ARN": "arn:x", "DATABASE_HOST": host,
                                  "DATABASE_PORT": str(port), "DATABASE_NAME": "tickwork", **env})
    conninfo = SecretCredentials(_Secret(), settings).conninfo()
    with pytest.raises(psycopg.OperationalError) as failure:
        psycopg.connect(conninfo, connect_timeout=10).close()
    return str(failure.value)


def test_verify_full_refuses_a_server_whose_ca_is_not_in_the_shipped_bundle(tls_server) -> None:
    port, handshakes = tls_server
    error = _connect("localhost", port, DATABASE_SSLMODE="verify-full")
    assert "certificate verify failed" in error
    assert Path(AWS_POSTGRES_CA_BUNDLE).is_file() and handshakes.get(timeout=10) is False


def test_verify_full_accepts_the_right_ca_and_host_then_meets_the_hang_up(tls_server, pki) -> None:
    port, handshakes = tls_server
    error = _connect("localhost", port, DATABASE_SSLMODE="verify-full", DATABASE_SSLROOTCERT=str(pki["ca"]))
    assert "certificate verify failed" not in error and "does not match" not in error
    assert handshakes.get(timeout=10) is True


def test_verify_full_refuses_a_host_name_the_certificate_does_not_carry(tls_server, pki) -> None:
    port, _ = tls_server
    # Reached by address: the certificate names only localhost.
    error = _connect("127.0.0.1", port, DATABASE_SSLMODE="verify-full", DATABASE_SSLROOTCERT=str(pki["ca"]))
    assert "does not match host name" in error


def test_require_encrypts_without_verifying(tls_server) -> None:
    port, handshakes = tls_server
    error = _connect("127.0.0.1", port, DATABASE_SSLMODE="require")
    assert "certificate verify failed" not in error
    assert handshakes.get(timeout=10) is True
