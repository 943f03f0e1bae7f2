"""The control port's shared secret: signed requests accepted, others refused, none applied twice."""

from __future__ import annotations

import json

import pytest

from hina.control.auth import (
    ENV,
    OPERATOR,
    REFUSED,
    Guard,
    TokenError,
    read_credentials,
    read_tenants,
    read_token,
    sign,
)

TOKEN = b"correct horse battery staple"


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def wire(msg: dict) -> dict:
    """What the switch parses: the request after a trip through JSON."""
    return json.loads(json.dumps(msg))


def test_a_signed_request_is_accepted_and_reads_need_no_token():
    clock = Clock()
    guard = Guard(TOKEN, clock=clock)
    msg = wire(sign({"op": "remove_job", "seq": 1, "job_id": 3}, TOKEN, now=clock.now))
    assert guard.check(msg, ("127.0.0.1", 5000)) == (None, None)
    for op in ("counters", "status", "jobs", "ping"):
        assert guard.check({"op": op, "seq": 2}, ("127.0.0.1", 5000)) == (None, None)


@pytest.mark.parametrize("op", ["add_job", "join", "leave", "remove_job", "reset_job", "configure", "shutdown"])
def test_every_change_without_a_valid_token_is_refused_in_one_line(op):
    guard = Guard(TOKEN, clock=Clock())
    assert guard.check({"op": op, "seq": 1}, None) == (REFUSED, None)
    forged = wire(sign({"op": op, "seq": 1}, b"another secret", now=Clock().now))
    assert guard.check(forged, None) == (REFUSED, None)
    tampered = wire(sign({"op": op, "seq": 1, "job_id": 1}, TOKEN, now=Clock().now))
    tampered["job_id"] = 2  # the MAC covers every field
    assert guard.check(tampered, None) == (REFUSED, None)
    assert REFUSED == "control request refused: no valid token (set HINA_TOKEN or --token-file)"


def test_an_old_or_future_timestamp_is_refused():
    clock = Clock()
    guard = Guard(TOKEN, clock=clock, window=30)
    old = wire(sign({"op": "reset_job", "seq": 1, "job_id": 1}, TOKEN, now=clock.now - 31))
    refusal, _ = guard.check(old, None)
    assert refusal.startswith("control request refused: its timestamp is +31 s off the switch's clock")
    future = wire(sign({"op": "reset_job", "seq": 1, "job_id": 1}, TOKEN, now=clock.now + 45))
    assert guard.check(future, None)[0].startswith("control request refused: its timestamp is -45 s off")
    assert guard.check(wire(sign({"op": "reset_job", "seq": 2}, TOKEN, now=clock.now - 29)), None) == (None, None)


def test_a_replay_is_refused_and_a_retransmission_gets_the_first_reply():
    clock = Clock()
    guard = Guard(TOKEN, clock=clock)
    msg = wire(sign({"op": "remove_job", "seq": 7, "job_id": 1}, TOKEN, now=clock.now))
    assert guard.check(msg, ("10.0.0.1", 4000)) == (None, None)
    reply = {"ok": True, "seq": 7}
    guard.remember(msg, reply)
    clock.now += 1
    assert guard.check(msg, ("10.0.0.1", 4000)) == (None, reply)  # the client's retry: answered, not applied
    refusal, again = guard.check(msg, ("10.0.0.66", 4000))  # the same bytes from elsewhere
    assert again is None and refusal == "control request refused: replayed (this signed request was already applied)"
    clock.now += 31  # and once its window is over, its timestamp refuses it
    assert guard.check(msg, ("10.0.0.1", 4000))[0].startswith("control request refused: its timestamp")


def test_tokens_come_from_a_file_or_the_environment(tmp_path):
    path = tmp_path / "hina.token"
    path.write_text("  s3cret  \nignored\n")
    assert read_token(path) == b"s3cret"
    assert read_token(None, environ={ENV: " from-env "}) == b"from-env"
    assert read_token(None, environ={}) is None and read_token(None, environ={ENV: "  "}) is None
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(TokenError, match="the file is empty"):
        read_token(tmp_path / "empty")
    with pytest.raises(TokenError, match="--token-file .*missing: No such file"):
        read_token(tmp_path / "missing")


def test_a_tenant_signs_as_its_owner_and_the_guard_says_who_signed():
    clock = Clock()
    guard = Guard(TOKEN, tenants={"alice": b"alice secret"}, clock=clock)
    mine = wire(sign({"op": "remove_job", "seq": 1, "job_id": 3}, b"alice secret", now=clock.now, owner="alice"))
    assert mine["owner"] == "alice" and guard.check(mine, None) == (None, None) and guard.who(mine) == "alice"
    operator = wire(sign({"op": "remove_job", "seq": 2, "job_id": 3}, TOKEN, now=clock.now))
    assert guard.check(operator, None) == (None, None) and guard.who(operator) == OPERATOR
    renamed = dict(mine, owner="bob")  # the owner is under the MAC: another name breaks it
    assert guard.check(renamed, None)[0] == "control request refused: this switch has no tenant 'bob'"
    forged = wire(sign({"op": "reset_job", "seq": 3}, b"alice secret", now=clock.now))  # her key, no owner
    assert guard.check(forged, None) == (REFUSED, None)
    assert guard.who({"op": "jobs", "seq": 4}) is None
    tenants_only = Guard(None, tenants={"alice": b"alice secret"}, clock=clock)
    assert tenants_only.check(operator, None) == (REFUSED, None)  # no operator: nobody signs as one


def test_credentials_and_tenants_files_are_read_and_bad_ones_named(tmp_path):
    (tmp_path / "alice.token").write_text("alice  s3cret\n")
    assert read_credentials(tmp_path / "alice.token") == ("alice", b"s3cret")
    assert read_credentials(None, environ={ENV: "s3cret"}) == (None, b"s3cret")
    assert read_token(tmp_path / "alice.token") == b"s3cret"
    (tmp_path / "tenants").write_text("# owners\nalice a-secret\n\nbob b-secret  # the second\n")
    assert read_tenants(tmp_path / "tenants") == {"alice": b"a-secret", "bob": b"b-secret"}
    for text, why in (("alice\n", "line 1: a tenant is OWNER SECRET"), ("alice a\nalice b\n", "alice is named twice"),
                      ("operator x\n", "not 'operator'"), ("a b c\n", "3 fields"), ("# none\n", "no OWNER SECRET")):
        (tmp_path / "bad").write_text(text)
        with pytest.raises(TokenError, match=why):
            read_tenants(tmp_path / "bad")
