"""The natural-language subset, rate()/at() spellings, and describe()."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tickwork.errors import ScheduleError
from tickwork.schedule.engine import parse_schedule


@pytest.mark.parametrize(
    ("phrase", "canonical"),
    [
        ("every 5 minutes", "rate(5 minutes)"),
        ("every minute", "rate(1 minute)"),
        ("Every 30 Seconds", "rate(30 seconds)"),
        ("every 2 hours", "rate(2 hours)"),
        ("every 3 days", "rate(3 days)"),
        ("every day at 09:30", "0 30 9 * * *"),
        ("daily at 9:30:15", "15 30 9 * * *"),
        ("every day at midnight", "0 0 0 * * *"),
        ("every day at 9:00 and 17:00", "0 0 9,17 * * *"),
        ("every weekday at 17:00", "0 0 17 * * MON-FRI"),
        ("every weekend at 10am", "0 0 10 * * SAT,SUN"),
        ("every monday at 8am", "0 0 8 * * MON"),
        ("every monday at 12am", "0 0 0 * * MON"),
        ("every friday at 12pm", "0 0 12 * * FRI"),
        ("every tue and thu at 6:45pm", "0 45 18 * * TUE,THU"),
        ("every Mondays, Wednesdays and Fridays at noon.", "0 0 12 * * MON,WED,FRI"),
        ("on tuesdays at 9", "0 0 9 * * TUE"),
        ("every hour at :15", "0 15 * * * *"),
        ("every minute at :30", "30 * * * * *"),
        ("every month on the 1st at 09:00", "0 0 9 1 * *"),
        ("every month on the last day at 23:00", "0 0 23 L * *"),
        ("once at 2026-12-24 18:00", "at(2026-12-24T18:00:00)"),
        ("rate(1 minutes)", "rate(1 minute)"),
        ("RATE( 45 s )", "rate(45 seconds)"),
        ("at(2026-12-24 18:00)", "at(2026-12-24T18:00:00)"),
    ],
)
def test_phrases_map_to_one_canonical_form(phrase: str, canonical: str) -> None:
    assert parse_schedule(phrase).canonical == canonical


@pytest.mark.parametrize(
    ("phrase", "message"),
    [
        ("every blue moon", "could not understand the schedule; use cron"),
        ("every funday at 9am", "could not understand the days of the week; use cron"),
        ("every day at 13pm", "a time with am or pm needs an hour of 1-12"),
        ("every day at 25:00", "a time of day must be between 00:00 and 23:59:59"),
        ("every day at 9:00 and 17:30", "times in one schedule must share minutes and seconds"),
        ("every hour at :75", "the minute or second after ':' must be 00-59"),
        ("every month on the 32nd at 9am", "the day of the month must be 1-31"),
    ],
)
def test_phrases_outside_the_subset_are_rejected(phrase: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(phrase)
    assert info.value.field == "schedule"
    assert info.value.message.startswith(message)


@pytest.mark.parametrize("expression", [
    "* * * * ZQXJ", "1-ZQXJ * * * *", "*/ZQXJ * * * *", "* * * ZQXJ-DEC *", "* * * * ZQXJ#2", "ZQXJ",
    "every ZQXJ at 9am", "every day at 77:77", "every hour at :77", "every month on the 77th at 9am",
    "rate(5 ZQXJ)", "at(ZQXJ)", "at(2001-01-01T00:00:00)", "0 0 77 * * *",
])
def test_messages_never_repeat_the_schedule(expression: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(expression, now=datetime(2026, 1, 1, tzinfo=UTC))
    assert not any(part in info.value.message.upper() for part in ("ZQXJ", "77", "2001")), info.value.message


def test_the_expression_is_kept_as_written() -> None:
    schedule = parse_schedule("every weekday at 17:00", "Europe/London")
    assert schedule.expression == "every weekday at 17:00"
    assert schedule.timezone == "Europe/London"


@pytest.mark.parametrize(
    ("expression", "timezone", "description"),
    [
        ("*/2 * * * * *", "UTC", "every 2 seconds"),
        ("* * * * * *", "UTC", "every second"),
        ("*/5 * * * *", "UTC", "every 5 minutes"),
        ("0 */2 * * *", "UTC", "every 2 hours"),
        ("every hour at :15", "UTC", "every hour at :15"),
        ("0,30 * * * * *", "UTC", "at seconds 0 and 30 of every minute"),
        ("*/10 * 9 * * *", "UTC", "every 10 seconds, during hour 9 every day (UTC)"),
        ("rate(1 minute)", "UTC", "every minute"),
        ("rate(30 seconds)", "UTC", "every 30 seconds"),
        ("0 30 9 * * MON-FRI", "Europe/London", "at 09:30 on Monday through Friday (Europe/London)"),
        ("every day at 09:30", "America/New_York", "at 09:30 every day (America/New_York)"),
        ("0 0 9,17 * * *", "UTC", "at 09:00 and 17:00 every day (UTC)"),
        ("0 0 12 * * 1#2", "UTC", "at 12:00 on the second Monday (UTC)"),
        ("0 0 * * 5L", "UTC", "at 00:00 on the last Friday (UTC)"),
        ("0 0 L * *", "UTC", "at 00:00 on the last day of the month (UTC)"),
        ("0 0 13 * FRI", "UTC", "at 00:00 on day 13 of the month or on Friday (UTC)"),
        ("0 0 12 1 JAN-MAR *", "UTC", "at 12:00 on day 1 of the month in January through March (UTC)"),
        ("*/15 9-17 * * MON-FRI", "UTC",
         "every 15 minutes, during hours 9 through 17 on Monday through Friday (UTC)"),
        ("at(2026-12-24T18:00:00)", "Europe/Paris", "once at 2026-12-24 18:00:00 (Europe/Paris)"),
    ],
)
def test_describe(expression: str, timezone: str, description: str) -> None:
    assert parse_schedule(expression, timezone).describe() == description


def test_describe_mentions_the_window() -> None:
    schedule = parse_schedule(
        "rate(5 minutes)", start_at=datetime(2026, 1, 1, tzinfo=UTC), end_at=datetime(2026, 2, 1, tzinfo=UTC)
    )
    assert schedule.describe() == "every 5 minutes, from 2026-01-01T00:00:00Z, until 2026-02-01T00:00:00Z"
