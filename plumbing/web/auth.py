"""HTTP basic auth against the bcrypt hashes of a web config, with successful checks cached.

bcrypt is slow on purpose (~50-100 ms at cost 10), and Prometheus sends the same credentials on every
scrape, so a success is remembered under a SHA-256 of (user, password, stored hash): the password itself
is never kept, and changing the hash in the file forgets the entry. A failure is never cached.

Every failed check costs what a check at the highest cost in the file costs, so timing tells no user name
apart: an unknown user is checked against a dummy hash of that cost, and a wrong password for a user whose
hash has a lower cost `c` is followed by dummy checks of costs c, c+1, ..., highest-1 (bcrypt's work doubles
with each cost, so 2^c + 2^c + ... + 2^(highest-1) = 2^highest). With one dummy of the highest cost alone, a
cost-5 user answered in 6 ms and an unknown one in 298 ms. A success is not padded: it tells nothing the
client did not know.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping

_DUMMY_SALT_AND_DIGEST = b"9m8RC2W7F1qM8IDUPgKspuv4ejEOk6A4OxbOtv4ghSepKe6VgSsI6"
"""Of a real hash (so bcrypt takes it at any cost); no password matches it at another cost."""
DEFAULT_COST = 10
"""bcrypt's default, the dummies' cost for a web config without users."""
_MAX_PASSWORD_BYTES = 72
"""bcrypt reads at most 72 bytes; the library refuses longer passwords."""
CACHE_SIZE = 256

Check = Callable[[bytes, bytes], bool]
"""(password, hash) -> whether they match: bcrypt's checkpw, or a test's wrapper around it that counts."""


def bcrypt_check(password: bytes, hashed: bytes) -> bool:
    import bcrypt  # here, not at the top: a process without basic_auth_users never loads it

    return bool(bcrypt.checkpw(password, hashed))


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

    def __init__(self, check: Check = bcrypt_check) -> None:
        self._check = check
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
        """The bcrypt check (slow: run it off the event loop); a success is cached, a failure costs the
        highest cost in `users` whoever the user."""
        hashed = users.get(user)
        secret = password.encode()
        highest = max((cost(h) for h in users.values()), default=DEFAULT_COST)
        if hashed is None:
            self._check(secret[:_MAX_PASSWORD_BYTES], dummy_hash(highest))
            return False
        if not self._check(secret[:_MAX_PASSWORD_BYTES], hashed) or len(secret) > _MAX_PASSWORD_BYTES:
            for padding in range(cost(hashed), highest):
                self._check(secret[:_MAX_PASSWORD_BYTES], dummy_hash(padding))
            return False
        with self._lock:
            self._verified[self._key(user, password, hashed)] = None
            while len(self._verified) > CACHE_SIZE:
                self._verified.popitem(last=False)
        return True


def cost(hashed: bytes) -> int:
    """The cost of a `$2y$NN$...` hash (webconfig checked the form)."""
    return int(hashed[4:6])


def dummy_hash(rounds: int) -> bytes:
    """A well-formed hash of cost `rounds` that no password matches."""
    return b"$2b$%02d$" % rounds + _DUMMY_SALT_AND_DIGEST
