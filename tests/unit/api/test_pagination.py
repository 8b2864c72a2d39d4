"""Pages bounded by bytes: which items a page keeps, where the next one starts, and how an item is measured."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from pydantic import BaseModel

from tickwork.api.pagination import fitted, response_bytes
from tickwork.models import Key, Page

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)


class Item(BaseModel):
    id: str
    text: str


def key(row: tuple[str, int]) -> Key:
    return T0 + timedelta(seconds=int(row[0])), row[0]


def shown(row: tuple[str, int]) -> Item:
    return Item(id=row[0], text='"\U0001F600' * row[1])


def test_an_item_is_measured_as_it_is_written_in_the_lambda_response() -> None:
    items = [shown(("1", 10)), shown(("2", 0)), Item(id="3", text="\\\x01é")]
    body = json.dumps({"items": [i.model_dump(mode="json") for i in items]}, separators=(",", ":"))
    envelope = json.dumps({"statusCode": 200, "body": body})
    overhead = len(json.dumps({"statusCode": 200, "body": json.dumps({"items": []}, separators=(",", ":"))}))
    assert len(envelope) == overhead + sum(response_bytes(i) for i in items) - 1  # no comma after the last


def test_a_page_stops_before_the_item_that_would_pass_the_budget_and_goes_on_from_there() -> None:
    rows = [(str(i), 100) for i in range(1, 6)]
    page = Page.of(rows + [("6", 100)], 5, key)
    each = response_bytes(shown(rows[0]))
    items, next_key = fitted(page, shown, budget=3 * each)
    assert [i.id for i in items] == ["1", "2", "3"] and next_key == key(rows[2])
    items, next_key = fitted(page, shown, budget=10 * each)
    assert [i.id for i in items] == ["1", "2", "3", "4", "5"] and next_key == page.next_key == key(rows[4])


def test_one_item_larger_than_the_budget_is_a_page_alone_so_the_list_moves_on() -> None:
    page = Page.of([("1", 1000), ("2", 1)], 10, key)
    items, next_key = fitted(page, shown, budget=10)
    assert [i.id for i in items] == ["1"] and next_key == key(("1", 1000))
    last, after = fitted(Page.of([("2", 1)], 10, key), shown, budget=10)
    assert [i.id for i in last] == ["2"] and after is None
    assert fitted(Page.of([], 10, key), shown) == ([], None)
