"""Optional authentication of model files: an HMAC-SHA256 under a key the user keeps.

A model file's SHA-256 digests (:mod:`geogp.persist.checks`) are unkeyed: they detect damage
and careless edits, but whoever can write the file can also recompute them, so a consistent
edit (another CRS, for one) passes. With ``key=`` at save, the metadata gets a ``mac``: an
HMAC-SHA256 over the metadata, which holds the digest of every array, so it covers the whole
file. Loading with the key refuses a file without a valid MAC; loading a signed file
without a key is refused too (the caller meant to check it, or should).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os

from geogp.exceptions import InputError, ReadError

__all__ = ["check_key", "read_key_file", "sign", "check_signature"]

MAC_FIELD = "mac"


def check_key(key: bytes | bytearray | memoryview | None) -> bytes | None:
    """``key`` as bytes (None stays None); refuses other types and an empty key."""
    if key is None:
        return None
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise InputError(f"key must be bytes (e.g. read from a key file); got "
                         f"{type(key).__name__}.")
    key = bytes(key)
    if not key:
        raise InputError("key must not be empty.")
    return key


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a key file (CLI ``--model-key-file``); one trailing newline is dropped."""
    try:
        with open(path, "rb") as f:
            key = f.read(1 << 16)
    except OSError as err:
        raise InputError(f"cannot read the key file {str(path)!r}: "
                         f"{err.strerror or err}.") from None
    if key.endswith(b"\n"):
        key = key[:-2] if key.endswith(b"\r\n") else key[:-1]
    if not key:
        raise InputError(f"the key file {str(path)!r} is empty.")
    return key


def _mac(meta: dict, key: bytes) -> str:
    body = {k: v for k, v in meta.items() if k not in ("meta_digest", MAC_FIELD)}
    return hmac.new(key, json.dumps(body, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def sign(meta: dict, key: bytes | None) -> None:
    """Add the MAC of ``meta`` (digests included) under ``key``; nothing without a key."""
    if key is not None:
        meta[MAC_FIELD] = _mac(meta, key)


def check_signature(meta: dict, key: bytes | None) -> None:
    """Refuse a signed file loaded without a key, and any file whose MAC does not match."""
    mac = meta.get(MAC_FIELD)
    if key is None:
        if mac is not None:
            raise ReadError("this model file is signed; pass key= (CLI: --model-key-file) to "
                            "check its signature before loading it.")
        return
    if not isinstance(mac, str):
        raise ReadError("this model file is not signed, and a key was given: it was written "
                        "without the key, or its signature was removed. Refused.")
    if not hmac.compare_digest(mac, _mac(meta, key)):
        raise ReadError("the model file's signature does not match the key: it was changed "
                        "after it was signed, or signed with another key. Refused.")
