"""How `make test` shares the suite between its test processes (pytest-xdist, `--dist loadgroup`).

A test runs wherever a process is free, except:
- `realtime` tests (they assert lateness against the wall clock, the product's one-second promise) run one at a
  time in one process, first, so the longest chain starts at once and never waits behind the rest; the other
  processes' tests run beside them, as other work shares a production host;
- the tests of a file whose fixtures outlive one test (a module's runtime, browser or Redis Cluster, a `sam
  build`) run in one process, so those are made once, as in a run without xdist.
`--dist loadgroup` reads a test's group from the end of its node id (`<id>@<group>`), which is set here: xdist
sets it from `xdist_group` marks through an attribute pytest 9 no longer reads. xdist also tells tests apart by
node id, and schemathesis gives each operation's fuzz test the same one (its name says which operation): those
get their name in their node id, else one of them would run for all.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

REALTIME_GROUP = "realtime"
# Fixtures wider than a test that every process has anyway (tests/conftest.py's, pytest's own): no reason to
# keep a file's tests together.
_SHARED_FIXTURE_BASES = ("", "tests")


def group(items: list[pytest.Item]) -> None:
    """Names each test's group in its node id, and puts the realtime group first (loadgroup keeps that order)."""
    repeated = {nodeid for nodeid, count in Counter(item.nodeid for item in items).items() if count > 1}
    for item in items:
        nodeid = f"{item.nodeid.rsplit('::', 1)[0]}::{item.name}" if item.nodeid in repeated else item.nodeid
        if item.get_closest_marker("realtime"):
            nodeid += f"@{REALTIME_GROUP}"
        elif _wide_fixture_of_its_own(item):
            nodeid += f"@{nodeid.split('::', 1)[0]}"
        if nodeid != item.nodeid:
            _set_node_id(item, nodeid)
    items.sort(key=lambda item: not item.get_closest_marker("realtime"))  # stable: the order within stays


def _wide_fixture_of_its_own(item: pytest.Item) -> bool:
    info: Any = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope != "function" and defs[-1].baseid not in _SHARED_FIXTURE_BASES
               for defs in info.name2fixturedefs.values())


def _set_node_id(item: pytest.Item, nodeid: str) -> None:
    """pytest 9 keeps an item's node id as a NodeId in `_id`; pytest 8 as a string in `_nodeid`."""
    current: Any = getattr(item, "_id", None)
    if current is not None and not isinstance(current, str):
        item._id = type(current).parse(nodeid)  # type: ignore[attr-defined]
    else:
        item._nodeid = nodeid  # type: ignore[attr-defined]
