"""Which Sender sends an executor's groups: the plain bounded one in Lambda, the shared one locally.

Both are reached the way their runtime reaches them: the executor handler (functions/executor/app.py)
with services built from the environment, as in Lambda, or as the local runtime configures them.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

import pytest

from tests.conftest import Target
from tests.integration.helpers import insert_job
from tickwork import wiring
from tickwork.dispatch.poller import Poller
from tickwork.interfaces import Group, Results, RunSteps, Sender
from tickwork.models import Dispatch, executor_event
from tickwork.runs.sending import BoundedSender
from tickwork.settings import Settings
from tickwork.timeutil import to_ms
from tickwork.wiring import Services
from tickwork_local.runtime import LocalRuntime
from tickwork_local.sending import SharedSender

Handler = Callable[[str], Callable[[dict[str, Any], Any], Any]]
T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def _spy(monkeypatch: pytest.MonkeyPatch, sender: Sender) -> list[int]:
    """Sizes of the groups `sender` is asked to send (it still sends them)."""
    sizes: list[int] = []
    send = sender.send

    def counting(steps: RunSteps, group: Group, results: Results) -> None:
        sizes.append(len(group))
        send(steps, group, results)

    monkeypatch.setattr(sender, "send", counting)
    return sizes


@pytest.fixture
def lambda_services(settings: Settings, services: Services, monkeypatch: pytest.MonkeyPatch) -> Iterator[Services]:
    """What the executor Lambda's `services()` builds from its environment on a cold start."""
    for name, value in {"DATABASE_URL": settings.database_url, "REDIS_URL": settings.redis_url,
                        "TICKWORK_NAMESPACE": settings.namespace, "TICKWORK_ALLOW_PRIVATE_TARGETS": "true",
                        "TICKWORK_KEY_FILE": settings.key_file}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("EXECUTOR_FUNCTION_NAME", raising=False)
    wiring.configure(None)
    built = wiring.services()
    yield built
    wiring.configure(services)
    built.close()


def test_the_executor_lambda_sends_a_group_with_the_plain_bounded_sender(
    services: Services, lambda_services: Services, handler: Handler, target: Target, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for i in range(3):
        insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=f"{target.url}/run{i}")
    Poller(services).tick(to_ms(T0))
    event = executor_event(services.invoker.dispatches)  # type: ignore[union-attr]
    assert type(lambda_services.sender) is BoundedSender
    sizes = _spy(monkeypatch, lambda_services.sender)

    assert handler("executor")(event, None) == {"outcomes": ["succeeded"] * 3}
    assert sizes == [3]
    assert sorted(r["path"] for r in target.requests) == ["/run0", "/run1", "/run2"]


def test_the_local_runtime_sends_a_group_with_its_shared_sender(
    settings: Settings, handler: Handler, monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = LocalRuntime(settings, port=0)
    runtime.start()
    try:
        local = wiring.services()  # what the runtime configured for the handlers it runs
        assert type(local.sender) is SharedSender
        sizes = _spy(monkeypatch, local.sender)
        unknown = [Dispatch(str(uuid.uuid4()), 1, to_ms(T0)) for _ in range(2)]  # no rows needed to reach the Sender
        event = executor_event(unknown)
        assert handler("executor")(event, None) == {"outcomes": ["duplicate", "duplicate"]}
        assert sizes == [2]
    finally:
        runtime.stop()
