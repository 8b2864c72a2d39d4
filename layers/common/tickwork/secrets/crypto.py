"""Envelope encryption of what Tickwork keeps secret at rest: AES-256-GCM under versioned data keys.

A value is sealed with the current data key and a fresh 96-bit nonce; its associated data names what it
is (tenant, secret name or job and header, key version), so a ciphertext copied to another row or field
does not open. A sealed value reads `v<version>:<base64 of nonce and ciphertext>`.

Data keys live in Postgres (`encryption_keys`) only wrapped, by a `KeyWrapper`: KMS in AWS (the stack's
key, GenerateDataKey/Decrypt), or a master key file under the local runtime's data directory. A plaintext
data key is unwrapped once and kept for the execution environment. Rotation adds a version: new values
use it, older ones still open; `tickwork.secrets.vault.rotate_data_key` moves everything onto it.
"""
from __future__ import annotations

import base64
import binascii
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from tickwork.errors import ConfigurationError, SealError

NONCE_BYTES = 12
DATA_KEY_BYTES = 32
# Another environment may have rotated: the current version is re-read this often (older keys still open).
CURRENT_VERSION_TTL_SECONDS = 60.0
_LOCAL_WRAP_AAD = b"tickwork/data-key"


class KeyWrapper(Protocol):
    """Makes and unwraps data keys; the wrapped form is what Postgres stores."""

    name: str

    def generate(self) -> tuple[bytes, bytes]:
        """A new data key: (plaintext, wrapped)."""
        ...

    def unwrap(self, wrapped: bytes) -> bytes: ...


class KmsWrapper:
    """Data keys from KMS: GenerateDataKey under the stack's key, Decrypt to unwrap. The client is made by
    `connect` at first use: an environment that never seals or opens a value (the poller's) never builds it."""

    name = "kms"

    def __init__(self, connect: Callable[[], Any], key_id: str) -> None:
        self.key_id = key_id
        self._connect = connect
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        with self._lock:  # boto3 does not make clients thread-safely, and the executor's threads may ask at once
            if self._client is None:
                self._client = self._connect()
            return self._client

    def generate(self) -> tuple[bytes, bytes]:
        answer = self.client.generate_data_key(KeyId=self.key_id, KeySpec="AES_256")
        return answer["Plaintext"], answer["CiphertextBlob"]

    def unwrap(self, wrapped: bytes) -> bytes:
        return self.client.decrypt(CiphertextBlob=wrapped, KeyId=self.key_id)["Plaintext"]


class LocalWrapper:
    """Data keys wrapped (AES-GCM) with a master key kept in a file, created 0600 on first use."""

    name = "local"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._master: bytes | None = None
        self._lock = threading.Lock()

    def generate(self) -> tuple[bytes, bytes]:
        plaintext = os.urandom(DATA_KEY_BYTES)
        return plaintext, _encrypt(self._key(), plaintext, _LOCAL_WRAP_AAD)

    def unwrap(self, wrapped: bytes) -> bytes:
        refusal = f"the data key does not open with the master key in {self.path}"
        return _decrypt(self._key(), wrapped, _LOCAL_WRAP_AAD, refusal)

    def _key(self) -> bytes:
        with self._lock:
            if self._master is None:
                self._master = _read_or_create_key_file(self.path)
            return self._master


def _read_or_create_key_file(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raw = path.read_bytes()
        if len(raw) != DATA_KEY_BYTES:
            raise SealError(f"{path} does not hold a {DATA_KEY_BYTES}-byte key") from None
        return raw
    key = os.urandom(DATA_KEY_BYTES)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


class KeyStore(Protocol):
    """Where wrapped data keys are kept (tickwork.store.secrets over Postgres)."""

    def current(self) -> tuple[int, bytes] | None:
        """The newest (version, wrapped key), None before the first."""
        ...

    def wrapped(self, version: int) -> bytes | None: ...

    def add(self, wrapped: bytes, wrapper: str) -> int:
        """Store a new wrapped key; returns its version."""
        ...


@dataclass
class Keyring:
    """Seals and opens values; plaintext data keys are cached for the execution environment."""

    wrapper: KeyWrapper
    clock: Callable[[], float] = time.monotonic
    _keys: dict[int, bytes] = field(default_factory=dict, repr=False)
    _current: tuple[int, float] | None = field(default=None, repr=False)  # (version, when read)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def seal(self, store: KeyStore, plaintext: str, context: str, version: int | None = None) -> str:
        """Seal under `version` (re-encryption names it), by default the current one."""
        version = self.current_version(store) if version is None else version
        sealed = _encrypt(self._key(store, version), plaintext.encode(), _aad(context, version))
        return f"v{version}:{base64.b64encode(sealed).decode()}"

    def open(self, store: KeyStore, sealed: str, context: str) -> str:
        version, blob = _parse(sealed)
        opened = _decrypt(self._key(store, version), blob, _aad(context, version), "a sealed value does not open here")
        return opened.decode()

    def version_of(self, sealed: str) -> int:
        return _parse(sealed)[0]

    def ensure(self, store: KeyStore) -> None:
        """Make sure a data key exists (creating the first one) before sealing inside a transaction."""
        self.current_version(store)

    def current_version(self, store: KeyStore) -> int:
        with self._lock:
            if self._current is not None and self.clock() - self._current[1] < CURRENT_VERSION_TTL_SECONDS:
                return self._current[0]
        newest = store.current()
        if newest is None:
            return self.rotate(store)
        version, wrapped = newest
        key = None if version in self._keys else self.wrapper.unwrap(wrapped)
        with self._lock:
            if key is not None:
                self._keys[version] = key
            self._current = (version, self.clock())
        return version

    def rotate(self, store: KeyStore) -> int:
        """Make a new data key the current one; returns its version."""
        plaintext, wrapped = self.wrapper.generate()
        version = store.add(wrapped, self.wrapper.name)
        with self._lock:
            self._keys[version] = plaintext
            self._current = (version, self.clock())
        return version

    def _key(self, store: KeyStore, version: int) -> bytes:
        with self._lock:
            key = self._keys.get(version)
        if key is not None:
            return key
        wrapped = store.wrapped(version)
        if wrapped is None:
            raise SealError(f"no data key of version {version}")
        key = self.wrapper.unwrap(wrapped)
        with self._lock:
            self._keys[version] = key
        return key


# cryptography is loaded by the first seal or open, not by every function's import: the poller never needs it.
def _encrypt(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """A fresh nonce, then the AES-GCM ciphertext and tag."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def _decrypt(key: bytes, sealed: bytes, aad: bytes, refusal: str) -> bytes:
    """What `_encrypt` sealed; SealError(refusal) when it does not open (wrong key, data or tampering)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
    except InvalidTag:
        raise SealError(refusal) from None


def _aad(context: str, version: int) -> bytes:
    return f"tickwork/{context}/v{version}".encode()


def _parse(sealed: str) -> tuple[int, bytes]:
    head, _, body = sealed.partition(":")
    try:
        if not head.startswith("v"):
            raise ValueError(head)
        return int(head[1:]), base64.b64decode(body, validate=True)
    except (ValueError, binascii.Error):
        raise SealError("not a sealed value") from None


def require_keyring(keyring: Keyring | None) -> Keyring:
    """The deployment's keyring; ConfigurationError when its settings name no key."""
    if keyring is None:
        raise ConfigurationError("set TICKWORK_KMS_KEY_ID or TICKWORK_KEY_FILE: secrets are stored encrypted")
    return keyring
