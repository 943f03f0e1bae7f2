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
CHANGES = frozenset({"add_job", "join", "remove_job", "reset_job", "configure", "shutdown"})
REFUSED = f"control request refused: no valid token (set {ENV} or --token-file)"


class TokenError(ValueError):
    """A token file that cannot be read or holds no secret; the message names it."""


def read_token(path: str | Path | None = None, *, environ: dict[str, str] | None = None) -> bytes | None:
    """The shared secret: the first line of `path` if given, else $HINA_TOKEN, else None (no token)."""
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenError(f"--token-file {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
        secret = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not secret:
            raise TokenError(f"--token-file {path}: the file is empty")
        return secret.encode()
    value = (os.environ if environ is None else environ).get(ENV, "").strip()
    return value.encode() if value else None


def _canonical(msg: dict[str, Any]) -> bytes:
    body = {k: v for k, v in msg.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def sign(msg: dict[str, Any], token: bytes, now: float | None = None) -> dict[str, Any]:
    """`msg` with "ts" and "mac" added (a copy)."""
    signed = {**msg, "ts": round(time.time() if now is None else now, 3)}
    signed["mac"] = hmac.new(token, _canonical(signed), hashlib.sha256).hexdigest()
    return signed


class Guard:
    """The switch's side: check a request's proof, remember what it took (for the window) so none runs twice."""

    def __init__(self, token: bytes, *, window: float = WINDOW, clock=time.time):
        if not token:
            raise ValueError("a guard needs a non-empty token")
        self.token, self.window, self.clock = token, window, clock
        self._seen: dict[str, tuple[float, Any, dict | None]] = {}  # mac -> (ts, peer, the reply sent)

    def check(self, msg: dict[str, Any], peer: Any = None) -> tuple[str | None, dict | None]:
        """(None, None): go ahead; (refusal line, None): refuse it; (None, reply): a retransmission of a
        request already applied: send `reply` again, apply nothing."""
        if msg.get("op") not in CHANGES:
            return None, None
        mac, ts = msg.get("mac"), msg.get("ts")
        if not isinstance(mac, str) or isinstance(ts, bool) or not isinstance(ts, (int, float)):
            return REFUSED, None
        want = hmac.new(self.token, _canonical(msg), hashlib.sha256).hexdigest()
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


__all__ = ["CHANGES", "ENV", "REFUSED", "WINDOW", "Guard", "TokenError", "read_token", "sign"]
