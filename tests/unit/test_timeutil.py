"""The API's one time format: RFC 3339 in UTC with milliseconds, four-digit years, exact round trips."""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tickwork.timeutil import EARLIEST, LATEST, parse_rfc3339, rfc3339

# RFC 3339 section 5.6 date-time, as the API writes it.
RFC3339_UTC_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.mark.parametrize(("moment", "text"), [
    (datetime(814, 11, 24, 6, 5, 4, 321000, tzinfo=UTC), "0814-11-24T06:05:04.321Z"),
    (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00.000Z"),
    (datetime(2026, 3, 12, 20, 4, tzinfo=timezone(timedelta(hours=1))), "2026-03-12T19:04:00.000Z"),
    (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "9999-12-31T23:59:59.999Z"),
])
def test_times_are_written_with_four_digit_years(moment: datetime, text: str) -> None:
    assert rfc3339(moment) == text
    assert RFC3339_UTC_MS.match(text)


@pytest.mark.parametrize("moment", [EARLIEST, LATEST - timedelta(milliseconds=1), datetime(2026, 7, 1, 12, tzinfo=UTC)])
def test_supported_times_round_trip(moment: datetime) -> None:
    assert parse_rfc3339(rfc3339(moment) or "") == moment


def test_the_supported_range_starts_at_the_epoch_and_leaves_room_for_schedule_maths() -> None:
    assert EARLIEST == datetime(1970, 1, 1, tzinfo=UTC)
    # Cron looks 60 years ahead and zone rules a year either side; datetime stops at year 9999.
    assert LATEST + timedelta(days=366 * 62) < datetime.max.replace(tzinfo=UTC)
