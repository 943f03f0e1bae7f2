"""A shared secret for the control port: requests that change a switch carry proof of it, never the secret.

A switch started with a token (`python -m hina.emulator --token-file PATH`, or
the environment variable HINA_TOKEN) refuses every control request that
changes its state (`CHANGES`: add_job, join, remove_job, reset_job,
configure, shutdown) unless the request carries

    "ts":  the sender's clock (Unix seconds), within `WINDOW` seconds of the switch's,
    "mac": HMAC-SHA256 under the token of the request's canonical JSON (sorted keys, no spaces,
           without "mac" itself), so of its op, seq, ts and every field, in hex;

and a request whose MAC it has already taken is never applied twice (a
retransmission from the same peer gets the first reply again; from elsewhere
it is refused as replayed).  Reads (counters, status, jobs, ping) stay open.
Without a token the switch takes every request, as before.

The clients (`ControlClient`, `hina worker`, `hina switch`, the DDP hook)
read the same token: `--token-file PATH` where a command has the flag, else
HINA_TOKEN.  A token file holds the secret on its first line (surrounding
whitespace ignored); anything from 16 random bytes up will do, e.g.
`python -c "import secrets; print(secrets.token_hex(32))" > hina.token`.

**Tenants.**  A switch may also hold one secret per job owner (`--tenants
FILE`: a line `OWNER SECRET` each).  An owner's token file holds `OWNER
SECRET` on its first line; its requests carry "owner" (under the MAC), and a
job an owner installs is theirs: only their token, or the operator's (the
switch's own `--token-file`), changes it (`OWNERS_ONLY`: join, leave,
remove_job, reset_job); configure and shutdown take the operator's alone.
Everyone may list every job.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from pathlib import Path
from typing import Any

ENV = "HINA_TOKEN"
WINDOW = 30.0  # seconds a signed request stays valid either side of the switch's clock
CHANGES = frozenset({"add_job", "join", "leave", "remove_job", "reset_job", "configure", "shutdown"})
OWNERS_ONLY = frozenset({"add_job", "join", "leave", "remove_job", "reset_job"})  # a job's owner or the operator
OPERATOR = "operator"  # who a request signed with the switch's own token comes from
REFUSED = f"control request refused: no valid token (set {ENV} or --token-file)"
OWNER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-@")


class TokenError(ValueError):
    """A token file that cannot be read or holds no secret; the message names it."""


def check_owner(name: str, where: str) -> str:
    if not name or not set(name) <= OWNER_CHARS or name == OPERATOR:
        raise TokenError(f"{where}: an owner's name is letters, digits and _.-@ (not {OPERATOR!r}), got {name!r}")
    return name


def _credentials(line: str, where: str) -> tuple[str | None, bytes]:
    """`SECRET` (the operator's, or a switch's single token) or `OWNER SECRET` (a tenant's)."""
    fields = line.split()
    if len(fields) == 1:
        return None, fields[0].encode()
    if len(fields) == 2:
        return check_owner(fields[0], where), fields[1].encode()
    raise TokenError(f"{where}: a token is SECRET or OWNER SECRET on one line, got {len(fields)} fields")


def read_credentials(path: str | Path | None = None, *,
                     environ: dict[str, str] | None = None) -> tuple[str | None, bytes] | None:
    """(owner or None, secret): the first line of `path` if given, else $HINA_TOKEN, else None (no token)."""
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenError(f"--token-file {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
        line = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not line:
            raise TokenError(f"--token-file {path}: the file is empty")
        return _credentials(line, f"--token-file {path}")
    value = (os.environ if environ is None else environ).get(ENV, "").strip()
    return _credentials(value, ENV) if value else None


def read_token(path: str | Path | None = None, *, environ: dict[str, str] | None = None) -> bytes | None:
    """The secret alone (`read_credentials`): the first line of `path` if given, else $HINA_TOKEN, else None."""
    found = read_credentials(path, environ=environ)
    return None if found is None else found[1]


def read_tenants(path: str | Path) -> dict[str, bytes]:
    """A switch's tenants: `OWNER SECRET` per line (blank lines and # comments skipped), owners distinct."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"--tenants {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    tenants: dict[str, bytes] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        owner, secret = _credentials(line, f"--tenants {path} line {n}")
        if owner is None:
            raise TokenError(f"--tenants {path} line {n}: a tenant is OWNER SECRET, got one field")
        if owner in tenants:
            raise TokenError(f"--tenants {path} line {n}: {owner} is named twice")
        tenants[owner] = secret
    if not tenants:
        raise TokenError(f"--tenants {path}: no OWNER SECRET line")
    return tenants


def _canonical(msg: dict[str, Any]) -> bytes:
    body = {k: v for k, v in msg.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def sign(msg: dict[str, Any], token: bytes, now: float | None = None, owner: str | None = None) -> dict[str, Any]:
    """`msg` with "ts" and "mac" added (a copy); a tenant's also with "owner"."""
    signed = {**msg, "ts": round(time.time() if now is None else now, 3)}
    if owner is not None:
        signed["owner"] = owner
    signed["mac"] = hmac.new(token, _canonical(signed), hashlib.sha256).hexdigest()
    return signed


class Guard:
    """The switch's side: check a request's proof, remember what it took (for the window) so none runs twice.

    token: the operator's secret (None: there is no operator, with tenants only); tenants: each owner's."""

    def __init__(self, token: bytes | None, *, tenants: dict[str, bytes] | None = None, window: float = WINDOW,
                 clock=time.time):
        if not token and not tenants:
            raise ValueError("a guard needs a non-empty token or tenants")
        self.token, self.tenants, self.window, self.clock = token or None, dict(tenants or {}), window, clock
        self._seen: dict[str, tuple[float, Any, dict | None]] = {}  # mac -> (ts, peer, the reply sent)

    def _secret(self, msg: dict[str, Any]) -> bytes | None:
        owner = msg.get("owner")
        return self.token if owner is None else self.tenants.get(owner) if isinstance(owner, str) else None

    def who(self, msg: dict[str, Any]) -> str | None:
        """Whom a request that passed `check` comes from: OPERATOR, an owner's name, or None (unsigned)."""
        if msg.get("op") not in CHANGES or not isinstance(msg.get("mac"), str):
            return None
        owner = msg.get("owner")
        return OPERATOR if owner is None else owner

    def check(self, msg: dict[str, Any], peer: Any = None) -> tuple[str | None, dict | None]:
        """(None, None): go ahead; (refusal line, None): refuse it; (None, reply): a retransmission of a
        request already applied: send `reply` again, apply nothing."""
        if msg.get("op") not in CHANGES:
            return None, None
        mac, ts = msg.get("mac"), msg.get("ts")
        if not isinstance(mac, str) or isinstance(ts, bool) or not isinstance(ts, (int, float)):
            return REFUSED, None
        secret = self._secret(msg)
        if secret is None:
            return (REFUSED if msg.get("owner") is None else
                    f"control request refused: this switch has no tenant {msg.get('owner')!r}"), None
        want = hmac.new(secret, _canonical(msg), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, mac):
            return REFUSED, None
        now = self.clock()
        if abs(now - ts) > self.window:
            return (f"control request refused: its timestamp is {now - ts:+.0f} s off the switch's clock "
                    f"(allowed ±{self.window:g} s): check the clocks, then send it again"), None
        self._forget(now)
        seen = self._seen.get(mac)
        if seen is not None:
            if seen[1] == peer and seen[2] is not None:
                return None, seen[2]
            return "control request refused: replayed (this signed request was already applied)", None
        self._seen[mac] = (ts, peer, None)
        return None, None

    def remember(self, msg: dict[str, Any], reply: dict) -> None:
        """The reply sent to an applied request, for its retransmissions."""
        mac = msg.get("mac")
        if isinstance(mac, str) and mac in self._seen:
            ts, peer, _ = self._seen[mac]
            self._seen[mac] = (ts, peer, reply)

    def _forget(self, now: float) -> None:
        if len(self._seen) > 64:
            for mac in [m for m, (ts, _, _) in self._seen.items() if abs(now - ts) > self.window]:
                del self._seen[mac]


__all__ = ["CHANGES", "ENV", "OPERATOR", "OWNERS_ONLY", "REFUSED", "WINDOW", "Guard", "TokenError", "check_owner",
           "read_credentials", "read_tenants", "read_token", "sign"]
