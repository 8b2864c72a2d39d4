"""Invokers: Lambda asynchronous invoke through boto3 (moto stands in for the AWS API), and the local pool."""
from __future__ import annotations

import io
import json
import threading
import zipfile
from typing import Any

import boto3
from moto import mock_aws

from tickwork.dispatch.invoker import EARLY_LEAD_MS, MAX_EARLY_GROUP_SIZE, LambdaInvoker, group_dispatches
from tickwork.models import Dispatch, dispatches_from_event, executor_event
from tickwork.settings import DEFAULT_BATCH_SIZE
from tickwork_local.executors import ThreadPoolInvoker


def _function_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return event\n")
    return buffer.getvalue()


def _executor_function() -> tuple[Any, list[dict[str, Any]]]:
    """A Lambda client on moto with the executor function, and the Invoke calls it makes."""
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="executor", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    client = boto3.client("lambda", region_name="us-east-1")
    client.create_function(FunctionName="tickwork-executor", Runtime="python3.13", Role=role,
                           Handler="app.handler", Code={"ZipFile": _function_zip()}, Architectures=["arm64"])
    calls: list[dict[str, Any]] = []
    client.meta.events.register("before-call.lambda.Invoke", lambda params, **_: calls.append(params))
    return client, calls


@mock_aws(config={"lambda": {"use_docker": False}})
def test_lambda_invoker_sends_one_async_event_per_dispatch() -> None:
    client, calls = _executor_function()

    dispatches = [Dispatch("e1", 1, 1_000), Dispatch("e2", 3, 2_000)]
    LambdaInvoker(client, "tickwork-executor").invoke(dispatches)

    assert [call["headers"]["X-Amz-Invocation-Type"] for call in calls] == ["Event", "Event"]
    sent = [dispatches_from_event(json.loads(call["body"])) for call in calls]
    # The invokes run concurrently (INVOKE_CONCURRENCY threads): they may reach Lambda in either order.
    assert sorted(sent, key=lambda group: group[0].execution_id) == [[dispatches[0]], [dispatches[1]]]


def test_thread_pool_invoker_runs_the_handler_with_the_executor_event() -> None:
    seen: list[dict[str, Any]] = []
    done = threading.Event()

    def handler(event: dict[str, Any], context: Any) -> None:
        seen.append(event)
        if len(seen) == 2:
            done.set()

    pool = ThreadPoolInvoker(handler, max_workers=2)
    pool.invoke([Dispatch("a", 1, 5), Dispatch("b", 2, 6)])
    assert done.wait(5)
    pool.shutdown()
    assert sorted(d.execution_id for e in seen for d in dispatches_from_event(e)) == ["a", "b"]


def _dispatches(n: int) -> list[Dispatch]:
    return [Dispatch(f"e{i}", 1, i) for i in range(n)]


def test_normal_load_gets_one_invocation_per_run() -> None:
    assert [len(g) for g in group_dispatches(_dispatches(20))] == [1] * 20


def test_a_burst_is_grouped_into_few_invocations_keeping_every_run_once() -> None:
    groups = group_dispatches(_dispatches(500))
    assert len(groups) == 10 and all(len(g) == 50 for g in groups)
    assert [d for g in groups for d in g] == _dispatches(500)


def test_ten_thousand_due_jobs_need_a_few_hundred_executors() -> None:
    size = DEFAULT_BATCH_SIZE  # the poller hands over one batch at a time
    batches = [_dispatches(size) for _ in range(10_000 // size)]
    assert sum(len(group_dispatches(b)) for b in batches) == 200


NOW_MS = 1_796_000_000_000  # any instant: grouping depends only on the runs' lead over it


def _due(n: int, lead_ms: int) -> list[Dispatch]:
    return [Dispatch(f"e{i}", 1, NOW_MS + lead_ms) for i in range(n)]


def test_a_heavy_instant_handed_over_early_waits_in_few_large_invocations() -> None:
    size = DEFAULT_BATCH_SIZE
    batches = [_due(size, lead_ms=6_500) for _ in range(10_000 // size)]
    groups = [g for b in batches for g in group_dispatches(b, NOW_MS)]
    assert len(groups) == 40 and all(len(g) == MAX_EARLY_GROUP_SIZE for g in groups)
    assert [d for g in groups for d in g] == [d for b in batches for d in b]


def test_runs_within_the_base_lookahead_keep_the_burst_grouping() -> None:
    assert [len(g) for g in group_dispatches(_due(500, lead_ms=1_500), NOW_MS)] == [50] * 10
    # One run of the hand-off is due sooner: the early grouping is for hand-offs wholly that far ahead.
    mixed = _due(499, lead_ms=6_500) + _due(1, lead_ms=EARLY_LEAD_MS - 1)
    assert sorted(len(g) for g in group_dispatches(mixed, NOW_MS)) == [1, 49] + [50] * 9  # the sooner run alone
    assert [len(g) for g in group_dispatches(_due(20, lead_ms=6_500), NOW_MS)] == [1] * 20


@mock_aws(config={"lambda": {"use_docker": False}})
def test_the_lambda_invoker_groups_by_lead_on_its_clock() -> None:
    client, calls = _executor_function()
    LambdaInvoker(client, "tickwork-executor", clock_ms=lambda: NOW_MS).invoke(_due(1000, lead_ms=6_500))
    assert sorted(len(dispatches_from_event(json.loads(c["body"]))) for c in calls) == [MAX_EARLY_GROUP_SIZE] * 4


def test_the_executor_event_carries_the_tenant_whose_place_a_run_holds() -> None:
    held = Dispatch("r1", 2, 1_000, tenant_id="t1")
    (received,) = dispatches_from_event(json.loads(json.dumps(executor_event([held]))))
    assert (received, received.tenant_id) == (held, "t1")
    # A run holding no place is written as before the quota existed.
    assert executor_event([Dispatch("r2", 1, 1_000)]) == {"dispatches": [{"execution_id": "r2", "attempt": 1,
                                                                          "fire_at_ms": 1_000}]}


def test_an_instant_many_runs_share_is_never_grouped_behind_runs_of_other_instants() -> None:
    """A tick's hand-off in the replay benchmark: tenant A's replays paced 5 ms apart, then tenant B's 100 jobs of
    the next whole second. An executor sends its group's instants in order, one after the other (each waits for
    its instant and reads the pause markers), so B's runs grouped after 20 of A's instants waited for all of them
    (up to 1.8 s late under load). Each group now holds one instant's runs, or runs alone at their instants."""
    second = NOW_MS + 1_500
    replays = [Dispatch(f"a{i}", 2, second - 1_000 + 5 * i) for i in range(200)]
    slots = [Dispatch(f"b{i}", 1, second) for i in range(100)]
    groups = group_dispatches(replays + slots, NOW_MS)
    assert all(len({d.fire_at_ms for d in g}) in (1, len(g)) for g in groups)
    for g in groups:
        if any(d.fire_at_ms == second for d in g):
            assert {d.fire_at_ms for d in g} == {second}
    assert sorted(d.execution_id for g in groups for d in g) == sorted(d.execution_id for d in replays + slots)
    assert len(groups) <= 12 and max(len(g) for g in groups) <= 30  # still about ten invocations, as big


def test_runs_alone_at_their_instants_are_grouped_in_instant_order() -> None:
    scattered = [Dispatch(f"r{i}", 2, NOW_MS + 1_000 + 7 * ((i * 37) % 100)) for i in range(100)]
    groups = group_dispatches(scattered, NOW_MS)
    assert [d for g in groups for d in g] == sorted(scattered, key=lambda d: d.fire_at_ms)
    assert [len(g) for g in groups] == [10] * 10
