"""What a tick does with one fetched batch of the due index, decided without I/O: each entry's claim and
what winning it means (a slot to record, or a dispatch of a run already recorded). An entry whose planning
raises is set aside with its reason, the others planned (tickwork.dispatch.quarantine); one of a kind this
release does not know is left where it is."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping

from tickwork import defaults
from tickwork.calendars.rules import Calendar
from tickwork.dispatch.calendars import Key
from tickwork.dispatch.calendars import keys_of as calendar_keys
from tickwork.dueindex.entries import Claim, DueEntry
from tickwork.errors import CalendarUnreadableError, ScheduleError
from tickwork.models import Dispatch
from tickwork.rules.policy import SlotPlan
from tickwork.rules.quarantine import Failure, Step, reason
from tickwork.schedule import specs as scheduling
from tickwork.schedule.excluded import MOVE_DAYS, ExcludingSchedule
from tickwork.store import executions as executions_store
from tickwork.timeutil import from_ms
from tickwork.vocab import DispatchKind, OnExcluded


@dataclass
class BatchPlan:
    """What to do with one fetched batch, decided without I/O.

    Each claim pairs with what winning it means: a new slot to record (a job) or a dispatch (a retry
    or manual run that already has its execution row).
    """

    claims: list[tuple[Claim, executions_store.Slot | Dispatch]] = field(default_factory=list)
    missing_specs: list[str] = field(default_factory=list)
    unplanned: int = 0  # entries after the budget ran out: not claimed, still due
    failed: list[Failure] = field(default_factory=list)  # entries whose planning raised: to quarantine
    failed_calendars: set[Key] = field(default_factory=set)  # the calendars those named: worth reading again
    unknown: list[DueEntry] = field(default_factory=list)  # of kinds this release does not know: left alone


def plan_batch(entries: list[DueEntry], now_ms: int, out_of_time: Callable[[], bool] = lambda: False,
               calendars: Mapping[Key, Calendar] | None = None,
               unreadable: Mapping[Key, Exception] | None = None) -> BatchPlan:
    """Plan each entry in order until `out_of_time()` (asked after each one, so a batch always plans one);
    `calendars`: those the entries' jobs name, by (tenant id, name), and `unreadable` those that could not be
    read (tickwork.dispatch.calendars): a job naming one is set aside."""
    plan = BatchPlan()
    applied: dict[tuple[Any, ...], ExcludingSchedule] = {}
    for done, entry in enumerate(entries, 1):
        try:
            _plan_entry(plan, entry, now_ms, calendars or {}, applied, unreadable)
        except Exception as error:  # noqa: BLE001 - this entry's failure alone (tickwork.dispatch.quarantine)
            _failed(plan, entry, error, now_ms)
        if done < len(entries) and out_of_time():
            plan.unplanned = len(entries) - done
            break
    return plan


def _plan_entry(plan: BatchPlan, entry: DueEntry, now_ms: int, calendars: Mapping[Key, Calendar],
                applied: dict[tuple[Any, ...], ExcludingSchedule], unreadable: Mapping[Key, Exception] | None) -> None:
    if not entry.is_job:
        if not entry.is_known:
            plan.unknown.append(entry)
            return
        execution_id, attempt = entry.execution()
        kind = DispatchKind.NOTIFICATION if entry.is_notification else DispatchKind.COMPLETION if entry.is_completion \
            else DispatchKind.RUN
        plan.claims.append((Claim(entry.member, entry.score, None), Dispatch(execution_id, attempt, entry.score, kind)))
        return
    schedule = _schedule_or_none(entry)
    if schedule is None or entry.spec is None:
        plan.missing_specs.append(entry.job_id)
        return
    schedule = _with_calendars(schedule, entry.spec, calendars, applied, unreadable)
    if isinstance(schedule, ExcludingSchedule) and (aimed := schedule.next_after_ms(entry.score - 1)) != entry.score:
        # Its score is a slot its calendars moved away (a calendar changed since, or a first slot from the bare
        # schedule): move the job on to where the slot now is, recording nothing.
        slot = executions_store.Slot(entry.job_id, from_ms(entry.score), _dt(aimed), int(entry.spec["v"]), None)
        plan.claims.append((Claim(entry.member, entry.score, aimed), slot))
        return
    decision = scheduling.plan_claim(entry.spec, schedule, entry.score, now_ms)
    claim = Claim(entry.member, entry.score, decision.next_ms)
    plan.claims.append((claim, _slot(entry.job_id, entry.score, entry.spec, decision, schedule)))


def _failed(plan: BatchPlan, entry: DueEntry, error: Exception, now_ms: int) -> None:
    """Set the entry aside with the step that raised: reading its member, reading a calendar, applying its
    calendars (its bare schedule plans), or planning its slot."""
    if not entry.is_job or not isinstance(entry.spec, dict):
        plan.failed.append(Failure(entry.member, entry.score, reason(Step.MEMBER, error)))
        return
    named = _named(entry.spec)
    if isinstance(error, CalendarUnreadableError):
        step, error = Step.CALENDAR, error.cause
    else:
        step = Step.CALENDARS if named and _plans_bare(entry, now_ms) else Step.PLAN
    plan.failed_calendars.update(named)
    tenant_id = entry.spec.get("t")
    plan.failed.append(Failure(entry.member, entry.score, reason(step, error),
                               tenant_id if isinstance(tenant_id, str) else None, entry.job_id))


def _named(spec: dict[str, Any]) -> list[Key]:
    """The calendars a spec names; none when its `c` is not what the API writes."""
    try:
        return [key for key in calendar_keys(spec) if isinstance(key[0], str) and isinstance(key[1], str)]
    except Exception:  # noqa: BLE001 - a broken spec: it names nothing worth reading again
        return []


def _plans_bare(entry: DueEntry, now_ms: int) -> bool:
    """Whether the job's schedule plans its slot without its calendars (they are then what raised)."""
    try:
        scheduling.plan_claim(entry.spec or {}, scheduling.schedule_of(entry.spec or {}), entry.score, now_ms)
    except Exception:  # noqa: BLE001 - the schedule raises too: the step is planning, not the calendars
        return False
    return True


def _with_calendars(schedule: Any, spec: dict[str, Any], calendars: Mapping[Key, Calendar],
                    applied: dict[tuple[Any, ...], ExcludingSchedule],
                    unreadable: Mapping[Key, Exception] | None = None) -> Any:
    """The job's schedule with the calendars its spec names applied (those missing exclude nothing; one that
    could not be read raises CalendarUnreadableError). One per schedule, calendars and mode in a batch
    (`applied`): jobs sharing a spec share its answers."""
    named = calendar_keys(spec)
    if not named:
        return schedule
    if unreadable:
        broken = next((key for key in named if key in unreadable), None)
        if broken is not None:
            raise CalendarUnreadableError(unreadable[broken])
    keys = tuple(key for key in named if key in calendars)
    if not keys:
        return schedule
    mode = spec["c"].get("on_excluded", defaults.ON_EXCLUDED)
    found = applied.get((schedule, keys, mode))
    if found is None:
        found = applied[(schedule, keys, mode)] = ExcludingSchedule(schedule, [calendars[k] for k in keys], mode)
    return found


def _slot(job_id: str, claimed_ms: int, spec: dict[str, Any], decision: SlotPlan,
          schedule: Any = None) -> executions_store.Slot:
    note = skipped = None
    if isinstance(schedule, ExcludingSchedule) and decision.fire_ms is not None:
        skipped = excluded_note(schedule, decision.fire_ms)
    if decision.missed_count:
        count = f"at least {decision.missed_count}" if decision.missed_at_least else str(decision.missed_count)
        note = (f"missed {count} run(s) from this slot on: Tickwork was behind and the job's "
                f"catch-up policy ({spec.get('ca')}, {spec.get('cw')} s window) did not run them")
    return executions_store.Slot(
        job_id, from_ms(claimed_ms), _dt(decision.next_ms), int(spec["v"]), _dt(decision.fire_ms),
        decision.missed_count, note, skipped,
    )


def excluded_note(schedule: ExcludingSchedule, slot_ms: int) -> str | None:
    """Why a slot is recorded skipped instead of run (its date is excluded), or None when it runs."""
    name = schedule.excluded_by(slot_ms)
    if name is None:
        return None
    day = schedule.local_date(slot_ms).isoformat()
    unmoved = "" if schedule.on_excluded == OnExcluded.SKIP \
        else f" and no date within {MOVE_DAYS} days after it is free"
    return f"skipped: {day} is excluded by calendar {name}{unmoved}"


def _dt(ms: int | None) -> datetime | None:
    return None if ms is None else from_ms(ms)


def _schedule_or_none(entry: DueEntry) -> Any:
    if not entry.spec:
        return None
    try:
        return scheduling.schedule_of(entry.spec)
    except (ScheduleError, KeyError, TypeError, ValueError):
        return None
