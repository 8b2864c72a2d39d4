"""A small interpreter of the Amazon States Language for the tick loop's definition (template.yaml): the
states and fields it uses, under the semantics AWS documents, on a simulated clock.

Why not an existing one: moto's Step Functions "parser" mode evaluates JSONata through a JVM bridge it does
not ship, and waits on the wall clock; aws-stepfunctions-toolkit installs on Python 3.13 only. JSONata is
jsonata-python's (a port of the reference implementation), with $millis() and $now() on the simulated clock.

What it runs, each by the documented rule:
- QueryLanguage JSONata: "{% ... %}" strings in Arguments, Output, Timestamp and Condition, with
  $states.input, .result, .errorOutput and .context. An expression that fails, or yields nothing
  (undefined), fails the state with States.QueryEvaluationError.
- Task, `arn:aws:states:::lambda:invoke` only: the function's return is `$states.result.Payload`; a
  function error is named by its errorType (the exception's class); TimeoutSeconds gives States.Timeout
  (checked once the invocation returns); Retry (ErrorEquals, IntervalSeconds, MaxAttempts, BackoffRate,
  MaxDelaySeconds), then Catch (ErrorEquals, Next, output $states.errorOutput). States.ALL matches every
  error but States.Runtime and States.DataLimitExceeded.
- Wait: Seconds, or a Timestamp (RFC 3339, `T` and `Z` or an offset) honoured to the second: Step Functions
  drops its milliseconds; a time already past continues at once.
- Choice (Condition, Next, Default; no match and no Default is States.NoChoiceMatched), Succeed.
- Express: an execution still running 5 minutes after it started ends TIMED_OUT.
A state using any other field is refused (NotImplementedError), so a change to the definition that this
interpreter would run wrongly fails the tests instead.
"""
from __future__ import annotations

import heapq
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from jsonata import Jsonata
from jsonata.jexception import JException
from jsonata.utils import Utils

LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"
# The fields this interpreter runs, per state type: a definition using any other is refused, not run wrong.
FIELDS = {
    "Task": {"Type", "Comment", "Resource", "Arguments", "Output", "TimeoutSeconds", "Retry", "Catch", "Next", "End"},
    "Wait": {"Type", "Comment", "Seconds", "Timestamp", "Output", "Next", "End"},
    "Choice": {"Type", "Comment", "Choices", "Default"},
    "Succeed": {"Type", "Comment", "Output"},
}
RETRIER_FIELDS = {"ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate", "MaxDelaySeconds", "Comment"}
EXPRESS_LIMIT_SECONDS = 300.0
UNCATCHABLE = {"States.Runtime", "States.DataLimitExceeded"}
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


class Stopped(BaseException):
    """Raised in a simulated process waiting when the simulation ends (not an error any state may catch)."""


class VirtualClock:
    """Simulated time for processes that take turns, each in a thread of its own: one runs until it sleeps or
    ends, then the earliest wake-up is resumed. Nothing waits on the wall clock."""

    def __init__(self, start: float) -> None:
        self._now = start
        self._queue: list[tuple[float, int, threading.Event]] = []
        self._order = itertools.count()
        self._turn_over = threading.Semaphore(0)
        self._stopped = False
        self._failures: list[BaseException] = []

    def time(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        """Block the calling process for `seconds` of simulated time."""
        wake = self._schedule(self._now + max(seconds, 0.0))
        self._turn_over.release()
        wake.wait()
        if self._stopped:
            raise Stopped

    def spawn(self, process: Callable[[], None], at: float | None = None) -> None:
        start = self._schedule(self._now if at is None else max(at, self._now))

        def run() -> None:
            start.wait()
            try:
                if not self._stopped:
                    process()
            except Stopped:
                pass
            except BaseException as exc:  # noqa: BLE001 - handed to run(), which raises it
                self._failures.append(exc)
            finally:
                self._turn_over.release()

        threading.Thread(target=run, daemon=True, name="simulated").start()

    def run(self, until: float) -> None:
        """Advance to `until`, resuming every process due before it in time order."""
        while self._queue and self._queue[0][0] <= until:
            self._now, _, wake = heapq.heappop(self._queue)
            wake.set()
            self._turn_over.acquire()
            if self._failures:
                self.stop()
                raise self._failures[0]
        self._now = max(self._now, until)

    def stop(self) -> None:
        """End the simulation: every waiting process raises Stopped and its thread ends."""
        self._stopped = True
        while self._queue:
            heapq.heappop(self._queue)[2].set()

    def _schedule(self, at: float) -> threading.Event:
        wake = threading.Event()
        heapq.heappush(self._queue, (at, next(self._order), wake))
        return wake


class StatesError(Exception):
    """An error a state reports, by its Step Functions error name."""

    def __init__(self, error: str, cause: str = "") -> None:
        super().__init__(f"{error}: {cause}")
        self.error, self.cause = error, cause


class _TimedOut(Exception):
    pass


class _ClockedJsonata(Jsonata):
    """jsonata-python reading $millis() and $now() from the simulated clock (once per evaluation, as JSONata)."""

    def __init__(self, text: str, clock: Callable[[], float]) -> None:
        self._clock = clock
        super().__init__(text)
        self.set_output_convert_nulls(False)  # so that null and undefined differ

    timestamp = property(lambda self: round(self._clock() * 1000), lambda self, _value: None)


def iso(at: float) -> str:
    """A time as Step Functions writes one in the context object: UTC, milliseconds, `Z`."""
    moment = datetime.fromtimestamp(at, tz=timezone.utc)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def deployed_definition(resource: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The definition Step Functions runs, from an AWS::StepFunctions::StateMachine as SAM writes it (a
    DefinitionString joined from lines) with its DefinitionSubstitutions, given what each one resolves to:
    CloudFormation replaces every `${Name}` in the text."""
    assert resource["Type"] == "AWS::StepFunctions::StateMachine"
    props = resource["Properties"]
    separator, lines = props["DefinitionString"]["Fn::Join"]
    assert all(isinstance(line, str) for line in lines), "a definition line that is not plain text"
    text = separator.join(lines)
    assert set(props.get("DefinitionSubstitutions", {})) == set(values)
    for name, value in values.items():
        text = text.replace("${" + name + "}", str(value))
    return json.loads(text)


@dataclass
class Execution:
    name: str
    started: float
    input: Any
    status: str = "RUNNING"
    error: str | None = None
    history: list[tuple[float, str, str]] = field(default_factory=list)  # (time, state, what happened)


class StateMachine:
    """Runs executions of one JSONata definition on `clock`; `functions` are the Lambda functions its
    tasks invoke, by ARN (each takes the payload and returns the function's result, or raises). `transition`
    is how long Step Functions takes from one state to the next, drawn per transition."""

    def __init__(self, definition: dict[str, Any], clock: VirtualClock,
                 functions: Mapping[str, Callable[[Any], Any]], transition: Callable[[], float] = lambda: 0.0,
                 name: str = "tick-loop") -> None:
        if definition.get("QueryLanguage") != "JSONata":
            raise NotImplementedError("only JSONata definitions")
        self.definition, self.clock, self.functions, self.transition, self.name = (
            definition, clock, functions, transition, name)
        self.executions: list[Execution] = []
        self._expressions: dict[str, _ClockedJsonata] = {}

    def start(self, name: str, input: Any = None, at: float | None = None) -> None:
        """StartExecution, at `at` (now by default), with `input` ({} by default, as Scheduler sends)."""
        self.clock.spawn(lambda: self._run(name, {} if input is None else input), at)

    # ------------------------------------------------------------------ execution
    def _run(self, name: str, input: Any) -> None:
        execution = Execution(name, self.clock.time(), input)
        self.executions.append(execution)
        state_name, data = self.definition["StartAt"], input
        try:
            while True:
                state = self.definition["States"][state_name]
                execution.history.append((self.clock.time(), state_name, "entered"))
                following, data = self._state(execution, state_name, state, data)
                if following is None:  # Succeed, or End
                    execution.status = "SUCCEEDED"
                    return
                self._sleep(execution, self.transition())
                state_name = following
        except _TimedOut:
            execution.status = "TIMED_OUT"
        except StatesError as exc:
            execution.status, execution.error = "FAILED", exc.error
        finally:
            execution.history.append((self.clock.time(), "", execution.status))

    def _state(self, execution: Execution, name: str, state: dict[str, Any], data: Any) -> tuple[str | None, Any]:
        kind = state["Type"]
        unknown = set(state) - FIELDS.get(kind, set()) | {
            f for retrier in state.get("Retry", []) for f in set(retrier) - RETRIER_FIELDS}
        if kind not in FIELDS or unknown:
            raise NotImplementedError(f"{name}: {kind} {sorted(unknown)}")
        if kind == "Task":
            return self._task(execution, name, state, data)
        if kind == "Wait":
            self._wait(execution, name, state, data)
            return state.get("Next"), self._output(execution, name, state, data)
        if kind == "Choice":
            return self._choice(execution, name, state, data), data
        return None, self._output(execution, name, state, data)  # Succeed

    def _task(self, execution: Execution, name: str, state: dict[str, Any], data: Any) -> tuple[str | None, Any]:
        attempts: dict[int, int] = {}
        while True:
            try:
                result = self._invoke(execution, name, state, data, sum(attempts.values()))
                return state.get("Next"), self._output(execution, name, state, data, result=result)
            except StatesError as exc:
                execution.history.append((self.clock.time(), name, f"failed {exc.error}"))
                delay = self._retry_delay(state.get("Retry", []), exc.error, attempts)
                if delay is None:
                    return self._catch(execution, name, state, data, exc)
                self._sleep(execution, delay)

    def _invoke(self, execution: Execution, name: str, state: dict[str, Any], data: Any, retries: int) -> Any:
        if state["Resource"] != LAMBDA_INVOKE:
            raise NotImplementedError(f"task resource {state['Resource']}")
        arguments = self._render(execution, name, state.get("Arguments", {}), {"input": data}, retries)
        began = self.clock.time()
        try:
            payload = self.functions[arguments["FunctionName"]](arguments.get("Payload"))
        except StatesError:
            raise
        except Exception as exc:  # a function error: Lambda reports the exception's type as errorType
            raise StatesError(type(exc).__name__, json.dumps({"errorMessage": str(exc)})) from exc
        if self.clock.time() - began > state.get("TimeoutSeconds", 60):
            raise StatesError("States.Timeout", "the task ran longer than its TimeoutSeconds")
        self._check_limit(execution)
        return {"ExecutedVersion": "$LATEST", "Payload": payload, "StatusCode": 200}

    @staticmethod
    def _retry_delay(retriers: list[dict[str, Any]], error: str, attempts: dict[int, int]) -> float | None:
        """The wait before the next attempt, or None when no retrier (left) takes this error."""
        for number, retrier in enumerate(retriers):
            if not _matches(retrier["ErrorEquals"], error):
                continue
            done = attempts.get(number, 0)
            if done >= retrier.get("MaxAttempts", 3):
                return None
            attempts[number] = done + 1
            delay = retrier.get("IntervalSeconds", 1) * retrier.get("BackoffRate", 2.0) ** done
            return min(delay, retrier.get("MaxDelaySeconds", delay))
        return None

    def _catch(self, execution: Execution, name: str, state: dict[str, Any], data: Any,
               exc: StatesError) -> tuple[str, Any]:
        error_output = {"Error": exc.error, "Cause": exc.cause}
        for catcher in state.get("Catch", []):
            if _matches(catcher["ErrorEquals"], exc.error):
                output = error_output if "Output" not in catcher else self._render(
                    execution, name, catcher["Output"], {"input": data, "errorOutput": error_output})
                return catcher["Next"], output
        raise exc

    def _wait(self, execution: Execution, name: str, state: dict[str, Any], data: Any) -> None:
        if "Seconds" in state:
            self._sleep(execution, float(self._render(execution, name, state["Seconds"], {"input": data})))
            return
        stamp = self._render(execution, name, state["Timestamp"], {"input": data})
        if not isinstance(stamp, str) or not _TIMESTAMP.match(stamp):
            raise StatesError("States.Runtime", f"the Timestamp is not an RFC 3339 time: {stamp!r}")
        # "Step Functions considers the time value up to seconds and truncates milliseconds."
        until = datetime.fromisoformat(stamp.replace("Z", "+00:00")).replace(microsecond=0).timestamp()
        self._sleep(execution, until - self.clock.time())

    def _choice(self, execution: Execution, name: str, state: dict[str, Any], data: Any) -> str:
        for choice in state["Choices"]:
            if self._render(execution, name, choice["Condition"], {"input": data}) is True:
                return choice["Next"]
        if "Default" not in state:
            raise StatesError("States.NoChoiceMatched", f"{name}: no choice matched")
        return state["Default"]

    def _output(self, execution: Execution, name: str, state: dict[str, Any], data: Any, **states: Any) -> Any:
        default = states.get("result", data)
        if "Output" not in state:
            return default
        return self._render(execution, name, state["Output"], {"input": data, **states})

    # ------------------------------------------------------------------ time and expressions
    def _sleep(self, execution: Execution, seconds: float) -> None:
        left = execution.started + EXPRESS_LIMIT_SECONDS - self.clock.time()
        if seconds >= left:
            self.clock.sleep(max(left, 0.0))
            raise _TimedOut
        self.clock.sleep(seconds)

    def _check_limit(self, execution: Execution) -> None:
        if self.clock.time() >= execution.started + EXPRESS_LIMIT_SECONDS:
            raise _TimedOut

    def _render(self, execution: Execution, name: str, template: Any, states: dict[str, Any], retries: int = 0) -> Any:
        if isinstance(template, dict):
            return {k: self._render(execution, name, v, states, retries) for k, v in template.items()}
        if isinstance(template, list):
            return [self._render(execution, name, v, states, retries) for v in template]
        if not (isinstance(template, str) and template.startswith("{%") and template.endswith("%}")):
            return template
        text = template[2:-2].strip()
        expression = self._expressions.get(text)
        if expression is None:
            expression = self._expressions[text] = _ClockedJsonata(text, self.clock.time)
        context = {"Execution": {"Id": f"{self.name}:{execution.name}", "Name": execution.name,
                                 "StartTime": iso(execution.started), "Input": execution.input},
                   "StateMachine": {"Name": self.name},
                   "State": {"Name": name, "EnteredTime": iso(self.clock.time()), "RetryCount": retries}}
        try:
            value = expression.evaluate(None, {"states": {**states, "context": context}})
        except JException as exc:
            raise StatesError("States.QueryEvaluationError", f"the JSONata expression '{text}': {exc}") from exc
        if value is None:
            raise StatesError("States.QueryEvaluationError", f"the JSONata expression '{text}' returned nothing")
        return Utils.convert_nulls(value)


def _matches(names: list[str], error: str) -> bool:
    return error in names or ("States.ALL" in names and error not in UNCATCHABLE)
