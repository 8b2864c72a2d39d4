"""Tickwork on one machine: the deployed handlers, with Lambda, Step Functions and API Gateway swapped out.

Lambda invoke becomes a thread pool, the Step Functions loop a thread ticking every whole second, and
API Gateway a local HTTP server producing the same events. The executors, all in this process, send
through one SharedSender. Everything between those edges is the code that runs in AWS. Given a Chaos,
executor invocations go through a ChaoticInvoker instead: Lambda's asynchronous delivery at its worst.
"""
from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timezone
from pathlib import Path

from tickwork.dueindex.reconcile import rebuild_index
from tickwork.settings import Settings
from tickwork.store.migrate import migrate
from tickwork.store.tenants import ensure_bootstrap_key
from tickwork.wiring import Services, build_services, configure
from tickwork_local.chaos import Chaos, ChaoticInvoker
from tickwork_local.config import DEFAULT_HOST, DEFAULT_PORT
from tickwork_local.executors import LocalInvoker
from tickwork_local.functions import FUNCTIONS_DIR, Functions
from tickwork_local.sending import SharedSender
from tickwork_local.server import ApiServer
from tickwork_local.ticker import MAINTENANCE_EVENT, MAINTENANCE_PERIOD_SECONDS, Ticker

logger = logging.getLogger(__name__)

# Executors are given this long to finish at shutdown; a run cut short stays `running` for the sweeper.
SHUTDOWN_GRACE_SECONDS = 5.0
# The API, the poller and up to MAX_WORKERS executors share the pool; waiting for a connection is cheap.
DB_POOL_SIZE = 16


class LocalRuntime:
    def __init__(
        self,
        settings: Settings,
        port: int = DEFAULT_PORT,
        host: str = DEFAULT_HOST,
        dev_api_key: str | None = None,
        functions_dir: Path = FUNCTIONS_DIR,
        chaos: Chaos | None = None,
        maintenance_period: float = MAINTENANCE_PERIOD_SECONDS,
    ) -> None:
        self.settings = settings
        self._address = (host, port)
        self._requested_key = dev_api_key
        self._functions_dir = functions_dir
        self._chaos = chaos
        self._maintenance_period = maintenance_period  # tests shorten it, with the sweeper's delays
        self.api_key = ""
        self.tenant_id = ""
        self._services: Services | None = None
        self._invoker: LocalInvoker | ChaoticInvoker | None = None
        self._server: ApiServer | None = None
        self._ticker: Ticker | None = None
        self._maintenance: Ticker | None = None

    @property
    def api_url(self) -> str:
        assert self._server is not None, "start() first"
        return self._server.url

    @property
    def invoker(self) -> LocalInvoker | ChaoticInvoker:
        assert self._invoker is not None, "start() first"
        return self._invoker

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        functions = Functions.load(self._functions_dir)
        # Bind first: a port in use fails the start before anything is written.
        self._server = ApiServer(*self._address, functions.api)
        if not self.settings.public_api_url:  # callback URLs point at this server (tickwork.rules.completion)
            self.settings = dataclasses.replace(self.settings, public_api_url=self._server.url)
        self._invoker = (LocalInvoker(functions.executor) if self._chaos is None
                         else ChaoticInvoker(functions.executor, self._chaos))
        self._services = build_services(self.settings, invoker=self._invoker, db_pool_size=DB_POOL_SIZE,
                                        sender=SharedSender())
        configure(self._services)
        self._prepare_data(self._services)
        self._ticker = Ticker(functions.poller)
        self._maintenance = Ticker(functions.poller, period=self._maintenance_period, event=MAINTENANCE_EVENT,
                                   name="tickwork-maintenance")
        self._server.start()
        self._ticker.start()
        self._maintenance.start()

    def _prepare_data(self, svc: Services) -> None:
        """Schema up to date, a key to call the API with, and a due index that agrees with Postgres."""
        with svc.db.connection() as conn:
            applied = migrate(conn)
            if applied:
                logger.info("applied migrations: %s", ", ".join(applied))
            self.tenant_id, self.api_key = ensure_bootstrap_key(conn, self._requested_key)
            # Postgres is the truth: whatever Redis kept (or lost) since the last run is rebuilt from it.
            rebuild_index(conn, svc.index, datetime.now(timezone.utc))

    def hold_ticks(self, seconds: float) -> None:
        """The poller gets no tick for `seconds` (maintenance and executors go on): a stalled loop, for tests."""
        assert self._ticker is not None, "start() first"
        self._ticker.hold(seconds)

    def stop(self) -> None:
        """Stop ticking, stop serving, give executors a short grace, then release every client."""
        for ticker in (self._ticker, self._maintenance):
            if ticker is not None:
                ticker.stop(timeout=SHUTDOWN_GRACE_SECONDS)
        if self._server is not None:
            self._server.stop(timeout=SHUTDOWN_GRACE_SECONDS)
        if self._invoker is not None and not self._invoker.close(SHUTDOWN_GRACE_SECONDS):
            logger.warning("executors still running after %.0fs; they stay `running` for the sweeper",
                           SHUTDOWN_GRACE_SECONDS)
        if self._services is not None:
            configure(None)
            self._services.close()
        self._ticker = self._maintenance = self._server = self._invoker = self._services = None
