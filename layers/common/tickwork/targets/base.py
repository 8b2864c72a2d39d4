"""The Target seam: how the executor calls a run's target, whatever its kind, in three steps.

1. `Target.prepare` (ahead of the run's instant, within the attempt's time: the run's `attempt_started_at` plus
   the timeout its kind gives it): render the call (secrets opened, the callback URL given), check the target,
   and make ready what calling it takes, so that the instant costs the call alone.
2. `Attempt.fire` (at the instant; tickwork.interfaces.Attempt, which a Sender handles): make the call, without
   waiting for the target; `Attempt.complete` then awaits its answer and classifies it into an Outcome
   (tickwork.outcome): success, or a failure kind, which decides whether the job's retry policy may try again.
3. `Target.judge` (once complete): the outcome under the job's success rules.

A kind never raises out of these steps: a target refused, a secret missing or a call that failed is an
Outcome of its failure kind. Its error text is what history stores and shows: never a secret, never a
credential, and for HTTP never the URL (its query may carry a token). Every kind passes the contract suite
(tests/contract/test_target_contract.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tickwork.interfaces import Attempt
from tickwork.models import StartedExecution
from tickwork.outcome import Outcome
from tickwork.targetspec.arns import service_of
from tickwork.targetspec.aws import AWS_KINDS
from tickwork.vocab import TargetKind

# What an ARN of no service Tickwork calls is given to: a kind whose preparation refuses it (the API never saves one).
_UNKNOWN_ARN = TargetKind.AWS_LAMBDA


def kind_of(run: StartedExecution) -> TargetKind:
    """The kind of target the run's job calls: HTTP for a job with a `request`; an AWS kind, by its ARN's service,
    for one with a `target` (tickwork.targetspec.aws)."""
    if run.target is None:
        return TargetKind.HTTP
    return AWS_KINDS.get(service_of(str(run.target.get("arn", ""))) or "", _UNKNOWN_ARN)


@dataclass(frozen=True)
class Callback:
    """Where a run in callback mode reports its completion (tickwork.rules.completion): the URL, holding
    `token`, which is made for this attempt alone and kept out of what is stored of its answer."""

    url: str
    token: str


class Target(Protocol):
    """One kind of target, made per executor invocation with the collaborators it needs."""

    kind: TargetKind

    def prepare(self, run: StartedExecution) -> Attempt:
        """The run's attempt, made ready as far as it can be ahead of its instant; what fails is an Attempt whose
        `complete` reports it (nothing is called)."""
        ...

    def judge(self, run: StartedExecution, outcome: Outcome) -> Outcome:
        """The outcome as the run's job counts it (its success rules); pure."""
        ...
