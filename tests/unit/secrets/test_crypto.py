"""Envelope encryption: values open only in their own context, old key versions keep opening after a
rotation, and data keys come wrapped from KMS (moto) or the local key file."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from tickwork.errors import SealError
from tickwork.secrets.crypto import Keyring, KmsWrapper, LocalWrapper


class MemoryKeyStore:
    """crypto.KeyStore in a list: the wrapped keys as Postgres would hold them."""

    def __init__(self) -> None:
        self.keys: list[tuple[bytes, str]] = []

    def current(self) -> tuple[int, bytes] | None:
        return (len(self.keys), self.keys[-1][0]) if self.keys else None

    def wrapped(self, version: int) -> bytes | None:
        return self.keys[version - 1][0] if 0 < version <= len(self.keys) else None

    def add(self, wrapped: bytes, wrapper: str) -> int:
        self.keys.append((wrapped, wrapper))
        return len(self.keys)


@pytest.fixture
def local(tmp_path: Path) -> Keyring:
    return Keyring(LocalWrapper(tmp_path / "keys" / "master.key"))


def test_a_value_opens_in_its_context_only(local: Keyring) -> None:
    store = MemoryKeyStore()
    sealed = local.seal(store, "hunter22", "secret/t1/TOKEN")
    assert "hunter22" not in sealed and sealed.startswith("v1:")
    assert local.open(store, sealed, "secret/t1/TOKEN") == "hunter22"
    for other in ("secret/t2/TOKEN", "secret/t1/OTHER", "header/t1/j1/authorization"):
        with pytest.raises(SealError):
            local.open(store, sealed, other)


def test_each_seal_uses_a_fresh_nonce(local: Keyring) -> None:
    store = MemoryKeyStore()
    assert local.seal(store, "same", "c") != local.seal(store, "same", "c")


def test_a_tampered_ciphertext_or_version_does_not_open(local: Keyring) -> None:
    store = MemoryKeyStore()
    sealed = local.seal(store, "value", "c")
    local.rotate(store)
    flipped = sealed[:-3] + ("A" if sealed[-3] != "A" else "B") + sealed[-2:]
    with pytest.raises(SealError):
        local.open(store, flipped, "c")
    with pytest.raises(SealError):
        local.open(store, "v2" + sealed[2:], "c")  # the version is bound into the associated data
    with pytest.raises(SealError):
        local.open(store, "not sealed", "c")


def test_after_rotation_new_values_use_the_new_version_and_old_ones_still_open(tmp_path: Path) -> None:
    store = MemoryKeyStore()
    path = tmp_path / "master.key"
    first = Keyring(LocalWrapper(path))
    old = first.seal(store, "old", "c")
    assert first.rotate(store) == 2
    new = first.seal(store, "new", "c")
    assert (first.version_of(old), first.version_of(new)) == (1, 2)
    # Another environment (nothing cached) opens both from the stored wrapped keys and the key file.
    other = Keyring(LocalWrapper(path))
    assert (other.open(store, old, "c"), other.open(store, new, "c")) == ("old", "new")


def test_an_environment_picks_up_a_rotation_elsewhere_after_its_cache_time(tmp_path: Path) -> None:
    store = MemoryKeyStore()
    now = [0.0]
    mine = Keyring(LocalWrapper(tmp_path / "k"), clock=lambda: now[0])
    assert mine.current_version(store) == 1
    Keyring(LocalWrapper(tmp_path / "k")).rotate(store)
    assert mine.current_version(store) == 1
    now[0] = 61.0
    assert mine.current_version(store) == 2


def test_the_local_key_file_is_created_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "data" / "keys" / "master.key"
    store = MemoryKeyStore()
    sealed = Keyring(LocalWrapper(path)).seal(store, "v", "c")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and len(path.read_bytes()) == 32
    assert Keyring(LocalWrapper(path)).open(store, sealed, "c") == "v"
    path.write_bytes(os.urandom(32))  # a different master key cannot unwrap the stored data key
    with pytest.raises(SealError):
        Keyring(LocalWrapper(path)).open(store, sealed, "c")


@mock_aws
def test_kms_data_keys_are_stored_wrapped_and_unwrapped_once_per_environment() -> None:
    kms = boto3.client("kms", region_name="us-east-1")
    key_id = kms.create_key(Description="tickwork secrets")["KeyMetadata"]["KeyId"]
    calls: list[str] = []
    wrapper = KmsWrapper(lambda: kms, key_id)
    original = wrapper.unwrap
    wrapper.unwrap = lambda wrapped: calls.append("decrypt") or original(wrapped)  # type: ignore[method-assign]
    store = MemoryKeyStore()
    sealed = Keyring(KmsWrapper(lambda: kms, key_id)).seal(store, "from kms", "c")
    assert store.keys[0][1] == "kms" and len(store.keys[0][0]) > 32  # a KMS ciphertext blob, not a key

    other = Keyring(wrapper)
    assert [other.open(store, sealed, "c") for _ in range(3)] == ["from kms"] * 3
    assert calls == ["decrypt"]
