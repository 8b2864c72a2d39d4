"""Runs dispatched attempts: win the execution, get ready, send at its instant, record, schedule a retry.

Everything that can happen before a run's instant does: the run is started in Postgres (one statement
for the whole invocation), its target is checked and the call made ready through its kind of target
(tickwork.targets.base: for HTTP, a keep-alive connection holding the rendered request). At the instant
only the request is written. How a group's runs are readied, sent and awaited is the
environment's Sender (`svc.sender`, tickwork.interfaces); the executor is the per-run core around it:
start, send, and end each attempt the way every attempt ends (tickwork.runs.ending), on its injected clock.
Results are written as they arrive, many per statement, never held back for the slowest.
"""
from __future__ import annotations

import math
import queue
import random
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Protocol, Sequence

from aws_lambda_powertools import Logger
from redis.exceptions import RedisError

from tickwork import metrics
from tickwork.dueindex.index import DueIndex
from tickwork.dueindex.inflight import InFlight
from tickwork.http.connections import Connections
from tickwork.interfaces import Attempt, Group, Result, Sender
from tickwork.models import Dispatch, StartedExecution
from tickwork.notifications.deliver import deliver
from tickwork.outcome import Failure, FailureKind
from tickwork.rules import completion, retry
from tickwork.runs import awaiting, ending, stops
from tickwork.runs.pool import ElasticPool
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.settings import Settings
from tickwork.store import completions as completions_store
from tickwork.store import executions as store
from tickwork.targets import kinds
from tickwork.targets.aws.clients import Clients
from tickwork.targets.aws.credentials import RoleSessions, executor_sts
from tickwork.targets.base import Callback, Target, kind_of
from tickwork.timeutil import rfc3339, to_ms
from tickwork.vocab import DispatchKind, NotEnded, NotStarted, TargetKind

logger = Logger(child=True)


class Environment(Protocol):
    """What an invocation uses of its execution environment's clients (tickwork.wiring.Services has them)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Any: ...  # psycopg_pool.ConnectionPool
    @property
    def index(self) -> DueIndex: ...
    @property
    def in_flight(self) -> InFlight: ...
    @property
    def sender(self) -> Sender: ...
    @property
    def keyring(self) -> Any: ...  # tickwork.secrets.crypto.Keyring, or None
    @property
    def sns(self) -> Any: ...  # boto3 SNS client, or None

# The poller hands a heavy instant's runs over up to TICKWORK_MAX_LOOKAHEAD_MS (10 s) early, and a run is
# never sent before its instant: the executor waits that long. Further out is a clock problem: it waits at
# most this long (with the 120 s request cap, well inside the 180 s function timeout), says so, and sends.
MAX_EARLY_WAIT_SECONDS = 20.0
# How long the recorder gathers a group's results after the first before writing them: one statement (one
# commit) for answers that arrive together instead of one for every few, at most this much later.
RECORD_LINGER_SECONDS = 0.02
# A group gives its written runs' places back at most this often (the first at once, the rest at its end): its
# answers are written a few at a time, and a Redis call per write cost the executor a quarter of the writes' own
# CPU at a heavy instant (issue 33). A place is held at most this much longer than its attempt.
GIVE_BACK_EVERY_SECONDS = 0.1


# What an execution environment keeps warm across its invocations. An environment runs one invocation
# at a time: in Lambda that is the process, in the local runtime one invoker thread.
_environment = threading.local()
# Threads the AWS kinds' calls are made on before more are added for calls that block (tickwork.runs.pool): an SDK
# call waits on the network far more than it computes.
AWS_CALL_THREADS = 32
# botocore waits for an answer this much longer than the longest attempt, which times out first.
AWS_READ_MARGIN_SECONDS = 5
_aws: dict[tuple[str, int], kinds.AwsAccess] = {}
_aws_lock = threading.Lock()


def http_client(settings: Settings | None = None) -> Connections:
    """This environment's keep-alive connections (one set per way `settings` ask connections to be made)."""
    options = (True, "") if settings is None else (settings.connect_ahead, settings.target_ca_bundle)
    kept: dict[tuple[bool, str], Connections] | None = getattr(_environment, "connections", None)
    if kept is None:
        kept = _environment.connections = {}
    if options not in kept:
        kept[options] = Connections(connect_ahead=options[0], ca_bundle=options[1])
    return kept[options]


def aws_access(settings: Settings) -> kinds.AwsAccess:
    """This environment's clients of AWS target roles and the threads their calls are made on, shared by every
    invocation it runs (one per role pattern and request cap); nothing is made until a run needs it."""
    key = (settings.target_role_pattern, settings.max_request_timeout_seconds)
    with _aws_lock:
        if key not in _aws:
            sessions = RoleSessions(executor_sts, settings.target_role_pattern)
            clients = Clients(sessions, read_timeout=settings.max_request_timeout_seconds + AWS_READ_MARGIN_SECONDS)
            _aws[key] = kinds.AwsAccess(clients, ElasticPool(AWS_CALL_THREADS, name="aws"))
        return _aws[key]


@dataclass
class Executor:
    """The per-run core of one invocation, and the RunSteps (tickwork.interfaces) its Sender calls."""

    svc: Environment
    http: Connections  # the environment's, kept warm (http_client)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    uniform: retry.Random = random.random  # the retry jitter's random source
    secrets: TenantSecrets = field(init=False)  # each tenant's, read once per invocation
    targets: dict[TargetKind, Target] = field(init=False)  # every kind, made for this invocation

    def __post_init__(self) -> None:
        self.secrets = TenantSecrets(self.svc, self.clock)
        self.targets = kinds.made(kinds.Means(self.svc.settings, self.secrets, self.callback, self.http,
                                              aws_access(self.svc.settings)))

    @property
    def index(self) -> DueIndex:
        return self.svc.index

    def run(self, dispatches: Sequence[Dispatch]) -> list[str]:
        """Run every dispatch of one invocation; returns each one's outcome (its status, or why it did
        not start: 'duplicate', 'skipped', 'waiting')."""
        if not dispatches:
            return []
        # Runs of jobs that allow overlap, and retries, start now; the rest are judged at their instant.
        with self.svc.db.connection() as conn:
            started = store.start_unguarded_many(conn, [(d.execution_id, d.attempt) for d in dispatches])
            # Their requests are signed with their tenants' keys: every tenant's in one statement, not one each.
            self.secrets.read_ahead(conn, {run.tenant_id for run in started.values()})
        if len(dispatches) == 1:  # nothing to overlap: no Sender, no threads
            outcome = self._run_alone(dispatches[0], started.get(dispatches[0].execution_id))
            give_back(self.svc, dispatches, [outcome])
            return [outcome]
        return _Group(self, dispatches, started).run()

    def _run_alone(self, dispatch: Dispatch, run: StartedExecution | None) -> str:
        if run is None:
            result = self.run_guarded(dispatch)
        else:
            prepared = self.prepare(run)
            self.connect(prepared, dispatch.fire_at_ms)
            self.wait_until(dispatch.fire_at_ms)
            if self.stopped_lately([run]) and self.drop_stopped([run]):
                prepared.abandon()
                return "skipped"
            result = Result(run, self.fire(prepared), prepared.complete())
        return result if isinstance(result, str) else self.record([result])[result.run.id]

    def run_guarded(self, dispatch: Dispatch) -> Result | str:
        """A run not started ahead: at its instant, judge it (start_guarded), then get ready and send;
        returns its result to record, or why it did not start."""
        self.wait_until(dispatch.fire_at_ms)
        judged = self.start_guarded(dispatch)
        if isinstance(judged, str):
            return judged
        prepared = self.prepare(judged)
        return Result(judged, self.fire(prepared), prepared.complete())

    def stopped_lately(self, runs: Sequence[StartedExecution]) -> set[str]:
        return stops.stopped_lately(self.svc.index, runs)

    def drop_stopped(self, runs: Sequence[StartedExecution]) -> set[str]:
        return stops.dropped(self.svc.db, runs)

    def start_guarded(self, dispatch: Dispatch) -> StartedExecution | str:
        """Start a first attempt of a job that forbids overlap, judged as things are at its instant."""
        with self.svc.db.connection() as conn:
            started = store.start_guarded(conn, dispatch.execution_id, dispatch.attempt)
        if isinstance(started, str):
            logger.info("run not started", extra={"execution_id": dispatch.execution_id,
                                                  "attempt": dispatch.attempt, "reason": started})
            metrics.record_not_started(started)
        return started

    def prepare(self, run: StartedExecution) -> Attempt:
        """Ready its attempt through its kind of target (tickwork.targets.base): a refused target or an unknown
        secret is a recorded failure."""
        return self.targets[kind_of(run)].prepare(run)

    def callback(self, run: StartedExecution) -> Callback | Failure | None:
        """In callback mode, the attempt's callback URL with a new token, its hash stored first (a target may
        call back before its answer is recorded); a refusal without a public API URL to build it on."""
        if not completion.is_callback(run.completion):
            return None
        if not self.svc.settings.public_api_url:
            return Failure(FailureKind.REFUSED,
                           "refused: completion by callback needs the public API URL (TICKWORK_PUBLIC_API_URL)")
        token = completion.new_token()
        with self.svc.db.connection() as conn:
            completions_store.arm(conn, run.id, run.attempt, completion.token_hash(token))
        return Callback(completion.callback_url(self.svc.settings.public_api_url, run.id, run.attempt, token), token)

    def connect(self, prepared: Attempt, fire_at_ms: int) -> None:
        """Take a ready attempt's last step ahead (tickwork.targets.base.Attempt.warm) no earlier than its lead
        before the instant: waits until then. Returns at once when it has none."""
        lead = prepared.warm_lead()
        if not lead:
            return  # ready, or what is left is done at the instant (fire)
        self.wait_until(fire_at_ms - int(lead * 1000))
        prepared.warm(within=max(0.0, fire_at_ms / 1000 - self.clock()))

    def fire(self, prepared: Attempt) -> datetime:
        """Send now; returns the moment it was sent (the attempt's start)."""
        sent_at = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
        prepared.fire()
        return sent_at

    def wait_until(self, fire_at_ms: int) -> None:
        early = fire_at_ms / 1000 - self.clock()
        if early > MAX_EARLY_WAIT_SECONDS:
            logger.warning("run dispatched further ahead of its instant than any lookahead: clock problem",
                           extra={"fire_at": rfc3339(datetime.fromtimestamp(fire_at_ms / 1000, tz=timezone.utc)),
                                  "early_seconds": round(early, 3)})
        if early > 0:
            self.sleep(min(early, MAX_EARLY_WAIT_SECONDS))

    def record(self, results: Sequence[Result]) -> dict[str, str]:
        """End the attempts sent (tickwork.runs.ending: decide, bound, write, queue what follows); returns each
        run's status, or 'superseded' if it was no longer ours."""
        now = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
        sent = [ending.answered(self._judged(result), now, self.uniform) for result in results]
        written = ending.end(self.svc.db.connection, self.index, sent, now, bool(self.svc.settings.operator_topic_arn))
        for e in written.ended:
            _log(e)
        metrics.record_attempts([(e.status, lag_ms(e.run, e.sent_at) if first_attempt(e.run) else None,
                                  e.outcome.duration_ms) for e in written.ended])
        return written.statuses()

    def _judged(self, result: Result) -> Result:
        """The result as its job counts it (its kind's judge: the job's success rules)."""
        return replace(result, outcome=self.targets[kind_of(result.run)].judge(result.run, result.outcome))

    def settle_waits(self, checks: Sequence[Dispatch]) -> list[str]:
        """At each one's deadline, settle a run awaiting its completion (tickwork.runs.awaiting); returns each
        one's new status, or 'unchanged' (completed already, or its deadline moved)."""
        outcomes = []
        operator = bool(self.svc.settings.operator_topic_arn)
        for check in checks:
            self.wait_until(check.fire_at_ms)
            now = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
            with self.svc.db.connection() as conn:
                status = awaiting.settle(conn, self.index, check.execution_id, check.attempt, now, operator,
                                         self.uniform)
            outcomes.append(status or NotEnded.UNCHANGED)
        return outcomes


def _log(ended: ending.AttemptEnd) -> None:
    run, outcome = ended.run, ended.outcome
    logger.info("attempt finished", extra={
        "execution_id": run.id, "job_id": run.job_id, "attempt": run.attempt, "status": ended.status,
        "status_code": outcome.status_code, "duration_ms": outcome.duration_ms, "error": outcome.error,
        "failure": outcome.failure,
        "lag_ms": lag_ms(run, ended.sent_at), **({"replay_count": run.replay_count} if run.replayed else {}),
    })


def lag_ms(run: StartedExecution, sent_at: datetime) -> int:
    return to_ms(sent_at) - to_ms(run.scheduled_for)


def first_attempt(run: StartedExecution) -> bool:
    """A first attempt sent for its slot, whose lag is the FireLag: not a replay's (sent when asked for)."""
    return run.attempt == 1 and not run.replayed


class _Group:
    """The runs of one invocation, sent by the environment's Sender, their results written by one
    recorder thread as they arrive."""

    def __init__(self, executor: Executor, dispatches: Sequence[Dispatch], started: dict[str, StartedExecution]):
        self.executor = executor
        self.dispatches = dispatches
        # An event naming a run twice runs it once (the started set is keyed by run).
        firsts = {d.execution_id: i for i, d in reversed(list(enumerate(dispatches)))}
        self.repeated = set(range(len(dispatches))) - set(firsts.values())  # positions answered 'duplicate'
        unique = [dispatches[i] for i in sorted(firsts.values())]
        self.by_run = {d.execution_id: d for d in unique}
        self.given_back: set[str] = set()  # runs whose place the recorder freed as their attempt was written
        self.to_give: list[Dispatch] = []  # written, their places not given back yet
        self.given_at = -math.inf  # time.monotonic() of the recorder's last give-back
        ahead = sorted(((d, started[d.execution_id]) for d in unique if d.execution_id in started),
                       key=lambda pair: pair[0].fire_at_ms)
        self.group = Group(ahead, [d for d in unique if d.execution_id not in started])
        self.outcomes: dict[str, str] = {}
        self.results: queue.SimpleQueue[Result | None] = queue.SimpleQueue()
        self.failure: Exception | None = None  # the first result write that failed, raised once all are done

    def run(self) -> list[str]:
        recorder = threading.Thread(target=self._record_results, name="recorder", daemon=True)
        recorder.start()
        try:
            self.executor.svc.sender.send(self.executor, self.group, self)
        finally:
            self.results.put(None)
            recorder.join()
        if self.failure is not None:
            raise self.failure
        outcomes = [NotStarted.DUPLICATE if i in self.repeated
                    else self.outcomes.get(d.execution_id, NotEnded.SUPERSEDED)
                    for i, d in enumerate(self.dispatches)]
        left = [(d, outcome) for d, outcome in zip(self.dispatches, outcomes) if d.execution_id not in self.given_back]
        if left:  # runs that did not start (or were not written): their places, but a duplicate's
            give_back(self.executor.svc, [d for d, _ in left], [outcome for _, outcome in left])
        return outcomes

    def put(self, result: Result) -> None:
        self.results.put(result)

    def not_started(self, dispatch: Dispatch, reason: str) -> None:
        self.outcomes[dispatch.execution_id] = reason

    def _record_results(self) -> None:
        """Write the results that arrive within RECORD_LINGER_SECONDS of the first in one go, then the
        next lot: none waits for the slowest, and a group's answers, which come together, share a write."""
        done = False
        while not done:
            batch: list[Result] = []
            item = self._next_result()
            linger_until = time.monotonic() + RECORD_LINGER_SECONDS
            while item is not None:
                batch.append(item)
                try:
                    item = self.results.get(timeout=max(linger_until - time.monotonic(), 0.0))
                except queue.Empty:
                    break
            done = item is None
            if batch:
                self._write(batch)
        self._give_back(at_once=True)

    def _next_result(self) -> Result | None:
        """The next result; places waiting to be given back are given back when due meanwhile."""
        while True:
            due = None if not self.to_give else max(self.given_at + GIVE_BACK_EVERY_SECONDS - time.monotonic(), 0.0)
            try:
                return self.results.get(timeout=due)
            except queue.Empty:
                self._give_back()

    def _give_back(self, at_once: bool = False) -> None:
        if self.to_give and (at_once or time.monotonic() >= self.given_at + GIVE_BACK_EVERY_SECONDS):
            give_back(self.executor.svc, self.to_give)
            self.given_back.update(d.execution_id for d in self.to_give)
            self.to_give, self.given_at = [], time.monotonic()

    def _write(self, batch: list[Result]) -> None:
        try:
            written = self.executor.record(batch)
        except Exception as exc:  # the runs stay `running`: the sweeper retries or ends them, as after a crash
            logger.exception("could not record attempts", extra={"execution_ids": [r.run.id for r in batch]})
            self.failure = self.failure or exc
            return
        self.outcomes.update(written)
        # A run's place among its tenant's runs in flight is free once its attempt is written (at most
        # GIVE_BACK_EVERY_SECONDS later), not when the invocation's slowest run (maybe another tenant's, on a
        # target that never answers) ends.
        self.to_give += [self.by_run[run_id] for run_id in written if run_id in self.by_run]
        self._give_back()


def give_back(svc: Environment, runs: Sequence[Dispatch], outcomes: Sequence[str] | None = None) -> None:
    """The runs ended (or never started): their places among their tenants' runs in flight are free again
    (tickwork.dispatch.budget), but for a 'duplicate': another delivery of the same attempt may be running
    it, and gives the place back when it ends. Failing that, each place lapses on its own."""
    if outcomes is not None:
        runs = [d for d, outcome in zip(runs, outcomes) if outcome != NotStarted.DUPLICATE]
    try:
        svc.in_flight.release(runs)
    except RedisError:
        logger.warning("could not give back places among runs in flight: they lapse instead",
                       extra={"execution_ids": [d.execution_id for d in runs if d.tenant_id]})


def handle_event(svc: Environment, dispatches: Sequence[Dispatch]) -> dict[str, Any]:
    """Runs first, then notifications (a notification target never delays a run), then the deadlines of runs
    awaiting their completion; outcomes in event order."""
    try:
        executor = Executor(svc, http_client(svc.settings))
        runs = [d for d in dispatches if d.kind == DispatchKind.RUN]
        notes = [d for d in dispatches if d.kind == DispatchKind.NOTIFICATION]
        checks = [d for d in dispatches if d.kind == DispatchKind.COMPLETION]
        try:
            ran = executor.run(runs)  # gives each run's place back as it ends
        except BaseException:
            give_back(svc, runs)  # the runs' outcomes are unknown: every place is given back
            raise
        outcomes = iter(ran)
        delivered = iter(deliver(executor, svc, executor.clock, executor.uniform, notes))
        settled = iter(executor.settle_waits(checks))
        by_kind: dict[str, Iterator[str]] = {DispatchKind.RUN: outcomes, DispatchKind.NOTIFICATION: delivered,
                                             DispatchKind.COMPLETION: settled}
        return {"outcomes": [next(by_kind[d.kind]) for d in dispatches if d.kind in by_kind]}
    finally:
        metrics.flush()
