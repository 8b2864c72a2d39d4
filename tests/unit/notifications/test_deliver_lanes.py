"""How a group's notifications are spread over threads (tickwork.notifications.deliver.tenant_lanes): each
tenant's over at most its bound, one job's in one lane in order, every tenant's first lane before anyone's
second."""
from __future__ import annotations

from tickwork.notifications.deliver import tenant_lanes


def _owner(item: tuple[str, str, int]) -> tuple[str, str]:
    return item[0], item[1]


def test_a_tenant_gets_at_most_its_bound_of_lanes_and_a_job_stays_in_one_in_order() -> None:
    items = [("a", f"j{i % 5}", i) for i in range(10)] + [("b", "k", 0)]
    lanes = tenant_lanes(items, _owner, 3)
    assert lanes == [
        [("a", "j0", 0), ("a", "j3", 3), ("a", "j0", 5), ("a", "j3", 8)],
        [("b", "k", 0)],
        [("a", "j1", 1), ("a", "j4", 4), ("a", "j1", 6), ("a", "j4", 9)],
        [("a", "j2", 2), ("a", "j2", 7)],
    ]


def test_every_item_is_in_exactly_one_lane() -> None:
    items = [(f"t{i % 3}", f"j{i % 7}", i) for i in range(40)]
    lanes = tenant_lanes(items, _owner, 2)
    assert sorted(item for lane in lanes for item in lane) == sorted(items)
    assert len(lanes) == 6
    assert tenant_lanes([], _owner, 4) == []
