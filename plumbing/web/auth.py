"""HTTP basic auth against the bcrypt hashes of a web config, with successful checks cached.

bcrypt is slow on purpose (~50-100 ms at cost 10), and Prometheus sends the same credentials on every
scrape, so a success is remembered under a SHA-256 of (user, password, stored hash): the password itself
is never kept, and changing the hash in the file forgets the entry. A failure is never cached. An unknown
user is checked against a dummy hash of the cost the configured hashes use (the highest, when they differ),
so the answer takes as long as for a known user and does not tell which names exist: a fixed cost-10 dummy
answered 24 times slower than a cost-5 user.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping

_DUMMY = b"$2b$10$9m8RC2W7F1qM8IDUPgKspuv4ejEOk6A4OxbOtv4ghSepKe6VgSsI6"
"""The dummy of cost 10 (bcrypt's default), for a web config of no users or unreadable costs."""
_dummies: dict[int, bytes] = {10: _DUMMY}
_dummies_lock = threading.Lock()
_MAX_PASSWORD_BYTES = 72
"""bcrypt reads at most 72 bytes; the library refuses longer passwords."""
CACHE_SIZE = 256


def credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an `Authorization: Basic ...` header; None when absent or malformed."""
    if not header:
        return None
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


class BasicAuth:
    """Verifies credentials; thread-safe (checks run in the server's worker threads)."""

    def __init__(self) -> None:
        self._verified: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(user: str, password: str, hashed: bytes) -> bytes:
        return hashlib.sha256(b"\0".join((user.encode(), password.encode(), hashed))).digest()

    def cached(self, users: Mapping[str, bytes], user: str, password: str) -> bool:
        """True when these credentials were verified before against the same hash (no bcrypt)."""
        hashed = users.get(user)
        if hashed is None:
            return False
        key = self._key(user, password, hashed)
        with self._lock:
            if key in self._verified:
                self._verified.move_to_end(key)
                return True
        return False

    def verify(self, users: Mapping[str, bytes], user: str, password: str) -> bool:
        """The bcrypt check (slow: run it off the event loop); a success is cached."""
        hashed = users.get(user)
        secret = password.encode()
        import bcrypt  # here, not at the top: a process without basic_auth_users never loads it

        ok = bcrypt.checkpw(secret[:_MAX_PASSWORD_BYTES], hashed or dummy_hash(users))
        if hashed is None or len(secret) > _MAX_PASSWORD_BYTES or not ok:
            return False
        with self._lock:
            self._verified[self._key(user, password, hashed)] = None
            while len(self._verified) > CACHE_SIZE:
                self._verified.popitem(last=False)
        return True


def dummy_hash(users: Mapping[str, bytes]) -> bytes:
    """A hash no password matches, of the highest cost among `users`' hashes (`$2y$NN$...`): made once per
    cost, so an unknown user costs what a known one does."""
    cost = max((int(hashed[4:6]) for hashed in users.values()), default=10)  # webconfig checked `$2y$NN$`
    with _dummies_lock:
        if cost not in _dummies:
            import bcrypt

            _dummies[cost] = bcrypt.hashpw(b"no password matches this dummy", bcrypt.gensalt(rounds=cost))
        return _dummies[cost]
