"""Schedule text: rate(...) and at(...) syntax, the natural-language subset, and describe() wording.

Every accepted spelling maps to one canonical form (six-field cron, `rate(N unit)` or `at(ISO)`),
which is what the API echoes back and what `tickwork.schedule.engine` evaluates.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from tickwork.errors import ScheduleError
from tickwork.schedule.cron import DAY_NAMES, MONTH_NAMES, normalize
from tickwork.timeutil import EARLIEST, LATEST

_UNIT_MS = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
_UNIT_ALIASES = {
    **{alias: "second" for alias in ("s", "sec", "secs", "second", "seconds")},
    **{alias: "minute" for alias in ("m", "min", "mins", "minute", "minutes")},
    **{alias: "hour" for alias in ("h", "hr", "hrs", "hour", "hours")},
    **{alias: "day" for alias in ("d", "day", "days")},
}
_RATE = re.compile(r"^rate\(\s*(\d+)\s*([a-z]+)\s*\)$")
_AT = re.compile(r"^at\(\s*([^)]*?)\s*\)$")
# Ten years: anything longer is a typo, and keeps the arithmetic far from any overflow.
MAX_RATE_MS = 10 * 366 * 86_400_000
_DAYS_FULL = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTHS_FULL = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)
_ORDINALS = ("first", "second", "third", "fourth", "fifth")
# A cron whose first field is an H (`H * * * *`, `H/15 ...`, `H(0-29) ...`), not a phrase.
_HASHED_FIRST = re.compile(r"^h\S*\s")
_HINT = "use cron ('0 30 9 * * *'), rate(5 minutes), at(2026-12-24T18:00:00) or e.g. 'every day at 09:30'"


def canonical(expression: str) -> str:
    """The canonical form of any accepted spelling; cron fields are validated later by `parse_cron`.

    Only ASCII once whitespace is collapsed: int() and the regexes' \\d also read digits of other scripts
    (`٣ * * * *` would run at minute 3), and upper() turns `ſun` into SUN.
    """
    text = " ".join(expression.split())
    if not text.isascii():
        raise ScheduleError("schedules are written in ASCII: digits 0-9 and English names")
    lower = text.lower()
    if lower.startswith("rate("):
        return _canonical_rate(lower)
    if lower.startswith("at("):
        return _canonical_at(text)
    if lower[:1].isalpha() and not _HASHED_FIRST.match(lower):
        return from_phrase(lower)
    return normalize(text)


def _canonical_rate(text: str) -> str:
    match = _RATE.match(text)
    unit = _UNIT_ALIASES.get(match.group(2)) if match else None
    if match is None or unit is None:
        raise ScheduleError("rate() needs a whole number and a unit (seconds, minutes, hours or days), "
                            "e.g. rate(30 seconds)")
    count = int(match.group(1))
    if count < 1:
        raise ScheduleError("rate() interval must be at least 1")
    if count * _UNIT_MS[unit] > MAX_RATE_MS:
        raise ScheduleError("rate() interval must be at most 10 years")
    return f"rate({count} {unit}{'' if count == 1 else 's'})"


def rate_ms(canonical_rate: str) -> int:
    count, unit = canonical_rate[5:-1].split(" ")
    return int(count) * _UNIT_MS[unit.rstrip("s")]


def _canonical_at(text: str) -> str:
    match = _AT.match(text)
    try:
        moment = datetime.fromisoformat(match.group(1).replace(" ", "T")) if match else None
    except ValueError:
        moment = None
    if moment is None:
        raise ScheduleError("at() needs a local date and time, e.g. at(2026-12-24T18:00:00)")
    if moment.tzinfo is not None:
        raise ScheduleError("at() takes a wall-clock time without an offset; the job's timezone applies")
    if moment.microsecond:
        raise ScheduleError("at() is precise to the second")
    if not EARLIEST.year <= moment.year < LATEST.year:
        raise ScheduleError(f"at() must be in the years {EARLIEST.year} to {LATEST.year - 1}")
    return f"at({moment.isoformat(timespec='seconds')})"


def at_wall_seconds(canonical_at: str) -> int:
    moment = datetime.fromisoformat(canonical_at[3:-1])
    return (moment - datetime(1970, 1, 1)) // timedelta(seconds=1)


# --- The natural-language subset (docs/schedules.md lists it).

_TIME = r"(?:noon|midnight|\d{1,2}(?::\d{2}){0,2}\s?(?:am|pm)?)"
_TIMES = rf"({_TIME}(?:\s?(?:,|and)\s?{_TIME})*)"
_DAY_WORDS = {name.lower(): i for i, name in enumerate(_DAYS_FULL)} | {n.lower(): i for i, n in enumerate(DAY_NAMES)}
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^every (?:(\d+) )?(second|minute|hour|day)s?$"), "rate"),
    (re.compile(r"^every (minute|hour) at :(\d{2})$"), "past"),
    (re.compile(rf"^(?:every day|daily) at {_TIMES}$"), "daily"),
    (re.compile(rf"^every (weekday|weekend day|weekend)s? at {_TIMES}$"), "weekdays"),
    (re.compile(rf"^every month on the (\d{{1,2}})(?:st|nd|rd|th)?(?: day)? at {_TIMES}$"), "monthly"),
    (re.compile(rf"^every month on the last day at {_TIMES}$"), "last"),
    (re.compile(rf"^(?:every|on) ([a-z, ]+?) at {_TIMES}$"), "days"),
    (re.compile(r"^once at (\d{4}-\d{2}-\d{2}[ t]\d{1,2}:\d{2}(?::\d{2})?)$"), "once"),
)


def from_phrase(text: str) -> str:
    """Map a phrase like 'every weekday at 17:00' to its canonical form; anything else is rejected."""
    text = text.rstrip(".")
    for pattern, kind in _PHRASES:
        match = pattern.match(text)
        if match:
            return _PHRASE_BUILDERS[kind](*match.groups())
    raise ScheduleError(f"could not understand the schedule; {_HINT}")


def _rate_phrase(count: str | None, unit: str) -> str:
    return _canonical_rate(f"rate({count or 1} {unit})")


def _past_phrase(unit: str, value: str) -> str:
    if int(value) > 59:
        raise ScheduleError("the minute or second after ':' must be 00-59")
    return f"{int(value)} * * * * *" if unit == "minute" else f"0 {int(value)} * * * *"


def _weekdays_phrase(kind: str, times: str) -> str:
    return _at_times(times, "*", "MON-FRI" if kind == "weekday" else "SAT,SUN")


def _monthly_phrase(day: str, times: str) -> str:
    if not 1 <= int(day) <= 31:
        raise ScheduleError("the day of the month must be 1-31")
    return _at_times(times, str(int(day)), "*")


def _days_phrase(days: str, times: str) -> str:
    words = re.split(r",\s?|\s?and\s|\s", days)
    names = [word.rstrip("s") if word.rstrip("s") in _DAY_WORDS else word for word in words]
    unknown = [name for name in names if name and name not in _DAY_WORDS]
    if unknown or not any(names):
        raise ScheduleError(f"could not understand the days of the week; {_HINT}")
    numbers = sorted({_DAY_WORDS[name] for name in names if name})
    return _at_times(times, "*", ",".join(DAY_NAMES[n] for n in numbers))


def _daily_phrase(times: str) -> str:
    return _at_times(times, "*", "*")


def _last_day_phrase(times: str) -> str:
    return _at_times(times, "L", "*")


def _once_phrase(moment: str) -> str:
    return _canonical_at(f"at({moment.replace(' ', 'T').upper()})")


def _at_times(times: str, dom: str, dow: str) -> str:
    parsed = [_clock(part) for part in re.split(r"\s?(?:,|and)\s?", times) if part]
    hours = sorted({hour for hour, _, _ in parsed})
    rest = {(minute, second) for _, minute, second in parsed}
    if len(rest) > 1:
        raise ScheduleError("times in one schedule must share minutes and seconds, e.g. 09:00 and 17:00")
    minute, second = rest.pop()
    return f"{second} {minute} {','.join(map(str, hours))} {dom} * {dow}"


def _clock(text: str) -> tuple[int, int, int]:
    if text in ("noon", "midnight"):
        return (12 if text == "noon" else 0), 0, 0
    digits, suffix = text.rstrip("apm").strip(), text[-2:] if text[-2:] in ("am", "pm") else ""
    hour, minute, second = ([int(p) for p in digits.split(":")] + [0, 0])[:3]
    if suffix and not 1 <= hour <= 12:
        raise ScheduleError("a time with am or pm needs an hour of 1-12")
    if suffix:
        hour = hour % 12 + (12 if suffix == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ScheduleError("a time of day must be between 00:00 and 23:59:59")
    return hour, minute, second


_PHRASE_BUILDERS: dict[str, Callable[..., str]] = {
    "rate": _rate_phrase,
    "past": _past_phrase,
    "daily": _daily_phrase,
    "weekdays": _weekdays_phrase,
    "monthly": _monthly_phrase,
    "last": _last_day_phrase,
    "days": _days_phrase,
    "once": _once_phrase,
}


# --- describe(): plain English for the canonical forms.


def describe_rate(canonical_rate: str) -> str:
    count, unit = canonical_rate[5:-1].split(" ")
    return f"every {unit}" if count == "1" else f"every {count} {unit}"


def describe_at(canonical_at: str, zone_name: str) -> str:
    return f"once at {canonical_at[3:-1].replace('T', ' ')} ({zone_name})"


def describe_window(text: str, start_ms: int | None, end_ms: int | None) -> str:
    if start_ms is not None:
        text += f", from {_iso(start_ms)}"
    if end_ms is not None:
        text += f", until {_iso(end_ms)}"
    return text


def _iso(ms: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def describe_cron(fields: tuple[str, ...], zone_name: str) -> str:
    second, minute, hour, dom, month, dow = fields
    interval = _interval(second, minute, hour)
    days = _days_text(dom, month, dow)
    if interval and not days:
        return interval
    when = interval or _time_of_day(second, minute, hour)
    if not days and hour == "*":
        return when
    return f"{when} {days or 'every day'} ({zone_name})"


def _interval(second: str, minute: str, hour: str) -> str | None:
    """Wording for the pure periods: every N seconds / minutes / hours, every hour at :MM."""
    if hour == "*" and minute == "*":
        if second == "*":
            return "every second"
        step = _step_of(second)
        if step:
            return f"every {step} seconds"
        return "every minute" if second == "0" else (f"every minute at second {second}" if second.isdigit() else None)
    if hour == "*" and second == "0":
        step = _step_of(minute)
        if step:
            return f"every {step} minutes"
        return f"every hour at :{int(minute):02d}" if minute.isdigit() else None
    if second == "0" and minute == "0":
        step = _step_of(hour)
        return f"every {step} hours" if step else None
    return None


def _step_of(text: str) -> int | None:
    prefix, _, step = text.partition("/")
    return int(step) if prefix == "*" and step.isdigit() else None


def _time_of_day(second: str, minute: str, hour: str) -> str:
    if second.isdigit() and minute.isdigit() and all(h.isdigit() for h in hour.split(",")):
        suffix = f":{int(second):02d}" if second != "0" else ""
        times = [f"{int(h):02d}:{int(minute):02d}{suffix}" for h in hour.split(",")]
        return "at " + _join(times)
    if second == "0":
        parts = [_field_text(minute, "minute"), _during(hour, "hour")]
    else:
        of_minute = minute == "*" and second[0] != "*"
        seconds = _field_text(second, "second") + (" of every minute" if of_minute else "")
        parts = [seconds, _during(minute, "minute"), _during(hour, "hour")]
    return ", ".join(part for part in parts if part)


def _during(text: str, unit: str) -> str:
    """A coarser field that only narrows when a finer one repeats: "during every 5th minute"."""
    if text == "*":
        return ""
    step = _step_of(text)
    if step:
        return f"during every {_nth(step)} {unit}"
    return _field_text(text, unit).replace("at ", "during ", 1)


def _nth(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _field_text(text: str, unit: str) -> str:
    if text == "*":
        return f"every {unit}"
    step = _step_of(text)
    if step:
        return f"every {step} {unit}s"
    if text.isdigit():
        return f"at {unit} {text}"
    terms = [term.replace("-", " through ") for term in text.split(",")]
    return f"at {unit}s {_join(terms)}"


def _days_text(dom: str, month: str, dow: str) -> str:
    day_parts = [part for part in (_dom_text(dom), _dow_text(dow)) if part]
    either = dom[0] not in "*?" and dow[0] not in "*?"
    days = (" or " if either else " and ").join(day_parts)
    if month != "*":
        days = f"{days} in {_join([_name(m, _MONTHS_FULL, 1) for m in month.split(',')])}".strip()
    return days


def _dom_text(dom: str) -> str:
    if dom in ("*", "?"):
        return ""
    words = {"L": "the last day of the month", "LW": "the last weekday of the month"}
    parts = [words.get(t) or (f"the weekday nearest day {t.strip('W')}" if "W" in t else f"day {t}")
             for t in dom.split(",")]
    return "on " + _join(parts) + ("" if dom in words else " of the month")


def _dow_text(dow: str) -> str:
    if dow in ("*", "?"):
        return ""
    return "on " + _join([_dow_term(term) for term in dow.split(",")])


def _dow_term(term: str) -> str:
    if "#" in term:
        day, _, nth = term.partition("#")
        return f"the {_ORDINALS[int(nth) - 1]} {_name(day, _DAYS_FULL, 0)}"
    if term.endswith("L") or term.startswith("L"):
        return f"the last {_name(term.strip('L'), _DAYS_FULL, 0)}"
    return _name(term, _DAYS_FULL, 0)


def _name(term: str, full: tuple[str, ...], first: int) -> str:
    """A value, range or step of a day/month field spelled with full names where it can be."""
    base, slash, step = term.partition("/")
    if "-" in base:
        low, _, high = base.partition("-")
        text = f"{_name(low, full, first)} through {_name(high, full, first)}"
    elif base in ("*", "?"):
        text = "every day" if full is _DAYS_FULL else "every month"
    else:
        names = DAY_NAMES if full is _DAYS_FULL else MONTH_NAMES
        index = names.index(base) if base in names else (int(base) - first) % len(full)
        text = full[index]
    return f"{text} (every {step})" if slash else text


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


