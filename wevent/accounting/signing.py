"""Signed checkpoints: Ed25519 signatures over a durable ledger's checkpoint (the ``sign`` extra,
`cryptography`).

The writer of a durable ledger holds the private key and signs every checkpoint it writes; the
auditor holds only the public key. A signature covers the message

    b"wevent-checkpoint-v1\\n" + b"<records>\\n" + bytes.fromhex(head)

so it vouches for the whole chain up to ``head`` (every record is bound into the head by the
hash chain) and for its length. Keys are files: the private key as unencrypted PKCS#8 PEM
(written with mode 0600), the public key as SubjectPublicKeyInfo PEM; a public key may also be
given as its 64 hex digits (the raw 32 bytes). What a signature does and does not protect
against is in docs/audits.md.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from wevent.accounting.budget import BudgetError

if TYPE_CHECKING:
    from typing import TypeAlias

    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    # A key object, or the path of its file.
    PrivateKeySource: TypeAlias = Path | str | Ed25519PrivateKey
    PublicKeySource: TypeAlias = Path | str | Ed25519PublicKey

__all__ = [
    "CHECKPOINT_DOMAIN",
    "checkpoint_message",
    "generate_key_pair",
    "key_id",
    "load_public_key",
    "load_signing_key",
    "sign_checkpoint",
    "verify_checkpoint",
]

CHECKPOINT_DOMAIN = b"wevent-checkpoint-v1\n"


def checkpoint_message(records: int, head: str) -> bytes:
    """The bytes a checkpoint signature covers."""
    return CHECKPOINT_DOMAIN + f"{records}\n".encode() + bytes.fromhex(head)


def _key_bytes(path: Path, what: str) -> bytes:
    """A key file's bytes (a regular file only: a FIFO would block), or `BudgetError`."""
    from wevent.accounting.inputs import check_input_file

    if path.exists():
        check_input_file(path)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BudgetError(f"{path}: cannot read the {what} ({exc.strerror})") from None


def load_signing_key(source: PrivateKeySource) -> Ed25519PrivateKey:
    """An Ed25519 private key: a key object, or the path of its PEM file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if isinstance(source, Ed25519PrivateKey):
        return source
    path = Path(source)
    data = _key_bytes(path, "signing key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise BudgetError(
            f"{path}: not an unencrypted PEM private key ({str(exc).splitlines()[0]})"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BudgetError(f"{path}: not an Ed25519 key ({type(key).__name__})")
    return key


def load_public_key(source: PublicKeySource) -> Ed25519PublicKey:
    """An Ed25519 public key: a key object, the path of its PEM file, or a file holding its 64
    hex digits."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if isinstance(source, Ed25519PublicKey):
        return source
    path = Path(source)
    data = _key_bytes(path, "public key")
    text = data.decode("ascii", errors="replace").strip()
    if re.fullmatch(r"[0-9a-fA-F]{64}", text):
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(text))
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise BudgetError(
            f"{path}: not a PEM public key or 64 hex digits ({str(exc).splitlines()[0]})"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise BudgetError(f"{path}: not an Ed25519 public key ({type(key).__name__})")
    return key


def key_id(key: Ed25519PublicKey) -> str:
    """A public key's 64 hex digits (its raw 32 bytes)."""
    return key.public_bytes_raw().hex()


def sign_checkpoint(key: Ed25519PrivateKey, records: int, head: str) -> dict[str, str]:
    """The signature fields of a checkpoint: ``signature`` (128 hex digits) and ``key`` (the
    signer's public key, for the reader's information: an auditor verifies against the key it
    trusts, never against this one)."""
    return {
        "signature": key.sign(checkpoint_message(records, head)).hex(),
        "key": key_id(key.public_key()),
    }


def verify_checkpoint(key: Ed25519PublicKey, records: int, head: str, signature: str) -> bool:
    """Whether ``signature`` (hex) is ``key``'s signature of the checkpoint (records, head)."""
    from cryptography.exceptions import InvalidSignature

    try:
        raw = bytes.fromhex(signature)
    except ValueError:
        return False
    try:
        key.verify(raw, checkpoint_message(records, head))
    except InvalidSignature:
        return False
    return True


def generate_key_pair(private_path: Path | str, public_path: Path | str) -> str:
    """Write a new Ed25519 key pair: the private key (PKCS#8 PEM, created with mode 0600; an
    existing file is never overwritten) and the public key (SubjectPublicKeyInfo PEM). Returns
    the public key's hex digits."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private_path, public_path = Path(private_path), Path(public_path)
    for path in (private_path, public_path):
        if path.exists():
            raise BudgetError(f"{path}: exists; a key file is never overwritten")
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(private)
    public_path.write_bytes(public)
    return key_id(key.public_key())
