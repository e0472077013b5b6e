"""Account passwords at rest: Fernet tokens whose key never enters the database.

The key comes from `CALAGENT_CREDENTIALS_KEY`, or from a file in the data dir that is created
with mode 0600 on first use (so `calagent up` works without configuration, and a database dump
alone does not reveal a password).
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

KEY_FILE = "credentials.key"


class CredentialsError(Exception):
    pass


def load_key(env_value: str | None, data_dir: Path) -> bytes:
    if env_value:
        return env_value.encode()
    path = data_dir / KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        # O_EXCL: two replicas starting together do not overwrite each other's key.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_bytes().strip()
        with os.fdopen(fd, "wb") as handle:
            handle.write(Fernet.generate_key())
    return path.read_bytes().strip()


class Vault:
    def __init__(self, key: bytes) -> None:
        try:
            self._fernet = Fernet(key)
        except ValueError as exc:
            raise CredentialsError(
                "CALAGENT_CREDENTIALS_KEY must be a Fernet key (32 url-safe base64-encoded bytes)"
            ) from exc

    def seal(self, password: str) -> bytes:
        return self._fernet.encrypt(password.encode())

    def open(self, token: bytes) -> str:
        try:
            return self._fernet.decrypt(token).decode()
        except InvalidToken as exc:
            raise CredentialsError("a stored password cannot be decrypted with this key") from exc
