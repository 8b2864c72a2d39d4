"""The scope rules of API keys: what a route needs, and what a new key may be given."""
from __future__ import annotations

import pytest

from tickwork.errors import InvalidInputError, MissingScopeError
from tickwork.tenant.access import ALL_SCOPES, JOBS_READ, JOBS_WRITE, KEYS_ADMIN, RUNS_WRITE, check, parse_scopes


def test_check_names_the_missing_scope() -> None:
    check({JOBS_READ}, JOBS_READ)
    with pytest.raises(MissingScopeError) as refused:
        check({JOBS_READ}, JOBS_WRITE)
    assert refused.value.scope == JOBS_WRITE and refused.value.message == "this API key lacks the scope jobs:write"
    assert refused.value.code == "missing_scope"


def test_the_default_is_every_scope_the_creating_key_holds_in_a_stable_order() -> None:
    assert parse_scopes(None, set(ALL_SCOPES)) == ALL_SCOPES
    assert parse_scopes(None, {KEYS_ADMIN, JOBS_READ}) == (JOBS_READ, KEYS_ADMIN)


def test_given_scopes_are_kept_once_in_a_stable_order() -> None:
    assert parse_scopes([KEYS_ADMIN, JOBS_READ, JOBS_READ], set(ALL_SCOPES)) == (JOBS_READ, KEYS_ADMIN)


@pytest.mark.parametrize(("given", "field"), [([], "scopes"), (["nope"], "scopes.0"), ([JOBS_READ, "jobs"], "scopes.1")])
def test_an_empty_list_or_an_unknown_scope_is_invalid_naming_the_field(given: list[str], field: str) -> None:
    with pytest.raises(InvalidInputError) as bad:
        parse_scopes(given, set(ALL_SCOPES))
    assert bad.value.field == field


def test_a_key_cannot_give_a_scope_it_lacks() -> None:
    with pytest.raises(MissingScopeError) as refused:
        parse_scopes([JOBS_READ, RUNS_WRITE], {KEYS_ADMIN, JOBS_READ})
    assert (refused.value.scope, refused.value.field) == (RUNS_WRITE, "scopes.1")
