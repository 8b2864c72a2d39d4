"""Postgres TLS in AWS: sslmode=verify-full against the CA bundle shipped in the layer, and the pool bound."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from psycopg.conninfo import conninfo_to_dict

from tickwork.errors import ConfigurationError
from tickwork.settings import AWS_POSTGRES_CA_BUNDLE, DEFAULT_DB_POOL_SIZE, Settings
from tickwork.store.credentials import SecretCredentials

ENV = {"REDIS_URL": "redis://h:6379/0", "DATABASE_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:x",
       "DATABASE_HOST": "db.abc.us-east-1.rds.amazonaws.com", "DATABASE_NAME": "tickwork"}


class _Secret:
    """Stands in for powertools' SecretsProvider (an AWS API), answering one login."""

    def get(self, name: str, **_: Any) -> dict[str, str]:
        return {"username": "tickwork", "password": "pw"}


def _conninfo(env: dict[str, str]) -> dict[str, Any]:
    return conninfo_to_dict(SecretCredentials(_Secret(), Settings.from_env(env)).conninfo())


def test_verify_full_checks_the_server_against_the_shipped_bundle() -> None:
    info = _conninfo({**ENV, "DATABASE_SSLMODE": "verify-full"})
    assert (info["sslmode"], info["sslrootcert"]) == ("verify-full", AWS_POSTGRES_CA_BUNDLE)
    assert Path(info["sslrootcert"]).is_file()


def test_an_operator_bundle_replaces_the_shipped_one() -> None:
    info = _conninfo({**ENV, "DATABASE_SSLMODE": "verify-ca", "DATABASE_SSLROOTCERT": "/opt/my-ca.pem"})
    assert (info["sslmode"], info["sslrootcert"]) == ("verify-ca", "/opt/my-ca.pem")


@pytest.mark.parametrize("mode", [None, "require", "prefer"])
def test_modes_that_do_not_verify_name_no_root_file(mode: str | None) -> None:
    """libpq's require verifies the CA whenever a root file is given: an existing server with its own CA
    must keep working with require, so no file is named then."""
    env = dict(ENV) if mode is None else {**ENV, "DATABASE_SSLMODE": mode}
    info = _conninfo(env)
    assert info["sslmode"] == (mode or "require") and "sslrootcert" not in info


def test_the_bundle_holds_the_rds_and_rds_proxy_roots() -> None:
    certs = x509.load_pem_x509_certificates(Path(AWS_POSTGRES_CA_BUNDLE).read_bytes())
    names = {c.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value for c in certs}
    # RDS instances (rds-ca-rsa2048-g1 is the default CA of a new instance), in this template's region.
    for generation in ("RSA2048 G1", "RSA4096 G1", "ECC384 G1"):
        assert f"Amazon RDS us-east-1 Root CA {generation}" in names
    # RDS Proxy's ACM certificates chain to Amazon Trust Services.
    assert {"Amazon Root CA 1", "Amazon Root CA 2", "Amazon Root CA 3", "Amazon Root CA 4"} <= names
    for cert in certs:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
        assert constraints.ca, cert.subject


def test_the_pool_size_is_read_per_environment_and_must_be_positive() -> None:
    assert Settings.from_env(ENV).db_pool_size == DEFAULT_DB_POOL_SIZE
    assert Settings.from_env({**ENV, "TICKWORK_DB_POOL_SIZE": "2"}).db_pool_size == 2
    with pytest.raises(ConfigurationError, match="TICKWORK_DB_POOL_SIZE"):
        Settings.from_env({**ENV, "TICKWORK_DB_POOL_SIZE": "0"})
