"""The Ed25519 key that signs checkpoints: created in the data dir (mode 0600) on first use, or
given by the operator (``LEDGER_CHECKPOINT_KEY_FILE``), like the control token."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from ledger.log.checkpoints import MalformedCheckpoint, public_key_from_text
from ledger.log.errors import UnsafeConfiguration
from ledger.log.private_files import publish_private_file


def _private_key_from_pem(path: Path, data: bytes) -> Ed25519PrivateKey:
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise UnsafeConfiguration(
            f"checkpoint key {path} is not a PEM private key: {exc}"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UnsafeConfiguration(f"checkpoint key {path} is not an Ed25519 key")
    return key


def load_or_create_signing_key(path: Path) -> Ed25519PrivateKey:
    """The key in ``path``; a new one written there (0600, PKCS#8 PEM) when there is none."""
    if not path.exists():
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        if publish_private_file(path, pem):
            return key
    return _private_key_from_pem(path, path.read_bytes())


def load_signing_key(path: Path) -> Ed25519PrivateKey | None:
    """The key in ``path``, or None when there is no such file (nothing is created)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return _private_key_from_pem(path, data)


def load_public_key(path: Path) -> Ed25519PublicKey:
    """A public key to check checkpoints with, from a file holding the base64 text that
    ``GET /v1/checkpoints/latest`` publishes, a PEM public key, or the PEM private key."""
    data = path.read_bytes()
    if b"PRIVATE KEY" in data:
        return _private_key_from_pem(path, data).public_key()
    if b"PUBLIC KEY" in data:
        key = load_pem_public_key(data)
        if not isinstance(key, Ed25519PublicKey):
            raise UnsafeConfiguration(f"{path} is not an Ed25519 public key")
        return key
    try:
        return public_key_from_text(data.decode("ascii", "replace"))
    except MalformedCheckpoint as exc:
        raise UnsafeConfiguration(f"{path}: {exc}") from None
