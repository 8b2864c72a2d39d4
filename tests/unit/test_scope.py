"""Scope: the API key asking is its actor's, not a second field that could disagree with the audit log."""
from __future__ import annotations

from dataclasses import fields
from datetime import datetime, timezone

from redis import Redis

from tickwork.dueindex.index import DueIndex
from tickwork.scope import Actor, Scope
from tickwork.settings import Settings

NOW = datetime(2026, 3, 10, 14, 22, 7, tzinfo=timezone.utc)


def _scope(actor: Actor | None) -> Scope:
    settings = Settings(database_url="", redis_url="")
    return Scope(None, DueIndex(Redis()), settings, "tenant-a", NOW, actor=actor)  # nothing connects


def test_the_key_asking_is_the_actors_key() -> None:
    assert _scope(Actor("key-1", "ci", "req-1", "203.0.113.42")).key_id == "key-1"
    assert _scope(Actor(None, "cloudformation:reports")).key_id is None  # a service: no key
    assert _scope(None).key_id is None  # operations, tests
    assert "key_id" not in {field.name for field in fields(Scope)}  # nothing to set apart from the actor
