"""The only module that reads the environment. Built once per execution environment."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from tickwork.errors import ConfigurationError

DEFAULT_NAMESPACE = "tickwork"
# Claim runs ahead so executors fire at the exact instant: ticking at half past each second, every slot
# is claimed 1.5 s before it is due, time for an asynchronous invoke to reach a warm executor.
DEFAULT_LOOKAHEAD_MS = 1500
# How far ahead a heavy instant may be claimed (tickwork.rules.lookahead): room to ready 10,000 runs sharing
# one second at the rate below. Set it to the lookahead to claim every instant alike.
DEFAULT_MAX_LOOKAHEAD_MS = 10_000
# The executor waits at most 20 s for a run's instant (tickwork.runs.executor.MAX_EARLY_WAIT_SECONDS).
MAX_LOOKAHEAD_LIMIT_MS = 15_000
# Runs the executors ready (start row, connection, request) per second, as the lookahead assumes.
DEFAULT_PREPARE_RUNS_PER_SECOND = 2000
# A batch large enough to make a 10,000-job burst a handful of round trips, small enough for one Lua call.
DEFAULT_BATCH_SIZE = 1000
# The tick lock only has to outlive one tick; a poller frozen longer must not block the next second.
DEFAULT_TICK_LOCK_MS = 900
# Backlog claims (slots already over 5 s late) one tenant may have per tick, after every on-time slot:
# a batch's worth, ten times the default quota's 100 runs a second, so a tenant's backlog drains while
# another tenant's cannot take its turn (tickwork.dispatch.backlog).
DEFAULT_BACKLOG_PER_TENANT = 1000
# One due-index shard: every key under one hash tag, as before sharding existed (tickwork.dueindex.shards).
DEFAULT_DUE_INDEX_SHARDS = 1
# Below one second the poller cannot honour the schedule.
DEFAULT_MIN_INTERVAL_SECONDS = 1
# Keep the executor well inside its own Lambda timeout.
DEFAULT_MAX_REQUEST_TIMEOUT_SECONDS = 120
# Run history is kept for a month; 0 keeps it forever.
DEFAULT_RETENTION_DAYS = 30
# A claim younger than this may still be on its way to Postgres; must exceed the lookahead plus one tick.
DEFAULT_RECONCILE_GRACE_SECONDS = 10
# A run still queued (or a retry still pending) this long after it was due lost its dispatch event.
DEFAULT_SWEEP_AFTER_SECONDS = 60
# Executor Lambda timeout (180 s) minus the longest request (120 s): an attempt older than its request
# timeout plus this cannot still be running anywhere.
DEFAULT_LOST_MARGIN_SECONDS = 60
# Quotas per tenant (overridden per tenant by the admin operation set-quotas): room for a team's jobs, not
# for one client's loop creating them; 6,000 runs a minute is 100 every-second jobs.
DEFAULT_MAX_JOBS = 1000
DEFAULT_MAX_RUNS_PER_MINUTE = 6000
# Runs kept per tenant before its oldest finished ones are pruned (maintenance), whatever their age: 30
# days of 23 every-minute jobs, or 3 hours of a tenant at quota; at most ~5 GB with 4 KB response bodies,
# so no one tenant fills the default 20 GB database.
DEFAULT_MAX_HISTORY_ROWS = 1_000_000
# Runs of one tenant dispatched and not yet ended (tickwork.dispatch.budget): that quota's 100 runs a second
# answering within 5 s, and half an account's default 1,000 concurrent executions, so one tenant whose
# targets hang (6,000 runs a minute at 120 s is ~12,000) cannot throttle everyone's executors and ticks.
DEFAULT_MAX_RUNS_IN_FLIGHT = 500
# A tenant's audit entries and stored Idempotency-Key answers together (tickwork.ops.storage): past it, its
# oldest are deleted. 30 days of 1,000 job changes a day take ~15 MB (an entry of a change is ~0.5 KB, of a
# creation ~1.5 KB); a tenant writing 16 KiB entries at its rate limit reaches it in about 11 minutes; 100
# tenants at it take 25 GiB, not the whole database.
DEFAULT_MAX_STORAGE_BYTES = 256 * 1024 * 1024
# A tenant's Idempotency-Keys kept (its oldest answered ones go first): a day of a key every 9 s, or 7 minutes
# of keyed requests at the tenant's rate limit.
DEFAULT_MAX_IDEMPOTENCY_KEYS = 10_000
# Replayed runs (POST /jobs/{id}/replay) one tenant sends a second: a week of an every-minute job's failures
# (10,080) goes out in 17 minutes instead of at once, a tenth of the default quota's 100 runs a second.
DEFAULT_REPLAY_PER_SECOND = 10
# Replayed runs one tenant may have waiting for their instant of that pace: an hour of it, three of the largest
# windows one request replays (10,000 runs); past it a replay is refused until the queue has drained.
DEFAULT_MAX_REPLAYS_QUEUED = 36_000
# Per API key: well above a person or a CI script, well below a loop; 0 turns the limit off.
DEFAULT_RATE_LIMIT_PER_SECOND = 20
DEFAULT_RATE_LIMIT_BURST = 40
# Per tenant, all its keys together: half the HTTP API's default stage limit (50 a second, burst 100, for
# every tenant), so one tenant's many keys cannot take the whole API from the others; 0 turns it off.
DEFAULT_TENANT_RATE_LIMIT_PER_SECOND = 25
DEFAULT_TENANT_RATE_LIMIT_BURST = 50
# Every query of an API request is cancelled by PostgreSQL past this (503 statement_timeout): well inside
# API Gateway's 29 s, with room for a request's few queries and the answer; 0 turns it off.
DEFAULT_API_STATEMENT_TIMEOUT_MS = 10_000
MAX_API_STATEMENT_TIMEOUT_MS = 25_000
DEFAULT_DATABASE_PORT = 5432
# RDS PostgreSQL 15+ refuses unencrypted connections. The template sets verify-full for AWS (below).
DEFAULT_DATABASE_SSLMODE = "require"
# The CAs of RDS instances and RDS Proxy (certs/aws-postgres-ca-bundle.pem, shipped in the layer): the
# root certificate file for sslmode verify-ca / verify-full unless DATABASE_SSLROOTCERT names another.
AWS_POSTGRES_CA_BUNDLE = str(Path(__file__).with_name("certs") / "aws-postgres-ca-bundle.pem")
# Connections one execution environment may open (its pool's maximum): see docs/deploy.md, "Connection
# budget". The template sets it per function (TICKWORK_DB_POOL_SIZE).
DEFAULT_DB_POOL_SIZE = 4
# A store that stops answering (a failover, a dropped NAT mapping) fails the call after this long instead of
# holding the tick or the run until the Lambda times out: Redis per command, PostgreSQL per connect.
# Generous beside the slowest normal call (a claim of 10,000 runs takes ~0.1 s, a rebuild page less).
DEFAULT_REDIS_TIMEOUT_SECONDS = 5
DEFAULT_DB_CONNECT_TIMEOUT_SECONDS = 5
# Target ports a job may use; empty: any. The local runtime and tests send to servers on random ports; the
# template sets the ports the functions' security group lets out (its TargetPorts, 80 and 443 by default).
DEFAULT_TARGET_PORTS: tuple[int, ...] = ()
# The roles a job's AWS target may have the executor assume (tickwork.targets.aws.credentials), IAM's wildcards:
# any account's `tickwork-target-*` roles. The template sets its own (TargetRolePattern: this account's, by default).
DEFAULT_TARGET_ROLE_PATTERN = "arn:aws:iam::*:role/tickwork-target-*"


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from exc


def _bounded(env: Mapping[str, str], name: str, default: int, low: int | None = 1, high: int | None = None,
             why: str = "") -> int:
    """_int, refused below `low` or above `high` (None: no bound)."""
    value = _int(env, name, default)
    if low is not None and value < low:
        raise ConfigurationError(f"{name} must be at least {low}")
    if high is not None and value > high:
        raise ConfigurationError(f"{name} must be at most {high}{why}")
    return value


def function_region(env: Mapping[str, str] | None = None) -> str:
    """The region Lambda runs the function in (AWS_REGION, which Lambda always sets); empty elsewhere. Read
    apart from Settings: a custom resource checks where to answer before anything else is built."""
    return (os.environ if env is None else env).get("AWS_REGION", "")


@dataclass(frozen=True)
class Settings:
    database_url: str
    redis_url: str
    namespace: str = DEFAULT_NAMESPACE
    executor_function_name: str = ""
    allow_private_targets: bool = False
    lookahead_ms: int = DEFAULT_LOOKAHEAD_MS
    max_lookahead_ms: int = DEFAULT_MAX_LOOKAHEAD_MS
    prepare_runs_per_second: int = DEFAULT_PREPARE_RUNS_PER_SECOND
    batch_size: int = DEFAULT_BATCH_SIZE
    tick_lock_ms: int = DEFAULT_TICK_LOCK_MS
    backlog_per_tenant: int = DEFAULT_BACKLOG_PER_TENANT
    due_index_shards: int = DEFAULT_DUE_INDEX_SHARDS
    min_interval_seconds: int = DEFAULT_MIN_INTERVAL_SECONDS
    max_request_timeout_seconds: int = DEFAULT_MAX_REQUEST_TIMEOUT_SECONDS
    retention_days: int = DEFAULT_RETENTION_DAYS
    reconcile_grace_seconds: int = DEFAULT_RECONCILE_GRACE_SECONDS
    sweep_after_seconds: int = DEFAULT_SWEEP_AFTER_SECONDS
    lost_margin_seconds: int = DEFAULT_LOST_MARGIN_SECONDS
    max_jobs: int = DEFAULT_MAX_JOBS
    max_runs_per_minute: int = DEFAULT_MAX_RUNS_PER_MINUTE
    max_history_rows: int = DEFAULT_MAX_HISTORY_ROWS
    max_runs_in_flight: int = DEFAULT_MAX_RUNS_IN_FLIGHT
    max_storage_bytes: int = DEFAULT_MAX_STORAGE_BYTES
    max_idempotency_keys: int = DEFAULT_MAX_IDEMPOTENCY_KEYS
    replay_per_second: int = DEFAULT_REPLAY_PER_SECOND
    max_replays_queued: int = DEFAULT_MAX_REPLAYS_QUEUED
    rate_limit_per_second: int = DEFAULT_RATE_LIMIT_PER_SECOND
    rate_limit_burst: int = DEFAULT_RATE_LIMIT_BURST
    tenant_rate_limit_per_second: int = DEFAULT_TENANT_RATE_LIMIT_PER_SECOND
    tenant_rate_limit_burst: int = DEFAULT_TENANT_RATE_LIMIT_BURST
    api_statement_timeout_ms: int = DEFAULT_API_STATEMENT_TIMEOUT_MS
    # Set instead of a password-bearing URL: the secret (RDS-managed) holds username and password.
    database_secret_arn: str = ""
    database_host: str = ""
    database_port: int = DEFAULT_DATABASE_PORT
    database_name: str = ""
    database_sslmode: str = DEFAULT_DATABASE_SSLMODE
    # Only set with a verifying sslmode: with a root file present, libpq's "require" verifies the CA too.
    database_sslrootcert: str = ""
    db_pool_size: int = DEFAULT_DB_POOL_SIZE
    redis_timeout_seconds: int = DEFAULT_REDIS_TIMEOUT_SECONDS
    db_connect_timeout_seconds: int = DEFAULT_DB_CONNECT_TIMEOUT_SECONDS
    # psycopg prepares a statement run 5 times on a connection; RDS Proxy pins such a session to one
    # database connection, so the template turns this off behind the proxy.
    db_prepared_statements: bool = True
    # Envelope encryption of secrets (tickwork.secrets.crypto): data keys from this KMS key, else from a key file.
    kms_key_id: str = ""
    key_file: str = ""
    # The stack's SNS topic that every final failure is published to (tickwork.runs.ends); empty: none.
    operator_topic_arn: str = ""
    # A PEM file of CAs trusted for HTTPS targets besides the system's (targets with a private CA); empty: none.
    target_ca_bundle: str = ""
    # Open each run's connection ahead of its instant (only the write is left for the instant); off: connect
    # at the instant, which costs a TCP (and TLS) handshake of lag on every run.
    connect_ahead: bool = True
    # The only ports a target URL may use (a request to another would wait for its timeout at the security
    # group); empty: any.
    target_ports: tuple[int, ...] = DEFAULT_TARGET_PORTS
    # The role ARNs an AWS target may name, patterns separated by commas (`*` and `?` as in IAM policies).
    target_role_pattern: str = DEFAULT_TARGET_ROLE_PATTERN
    # The API's public base URL, for the callback URL of a job completed by callback (tickwork.rules.completion);
    # empty: such jobs' attempts are refused.
    public_api_url: str = ""
    # The layer version this code came in (the migrations function's): a schema migration asked for with
    # an older one is a stack rolling back, which migrates nothing (tickwork.ops.provisioning).
    code_version: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        _require_database(env)
        if not env.get("REDIS_URL"):
            raise ConfigurationError("missing environment variable(s): REDIS_URL")
        sslmode = env.get("DATABASE_SSLMODE") or DEFAULT_DATABASE_SSLMODE
        return cls(
            database_url=env.get("DATABASE_URL", ""),
            redis_url=env["REDIS_URL"],
            namespace=env.get("TICKWORK_NAMESPACE") or DEFAULT_NAMESPACE,
            executor_function_name=env.get("EXECUTOR_FUNCTION_NAME", ""),
            allow_private_targets=_bool(env.get("TICKWORK_ALLOW_PRIVATE_TARGETS"), False),
            lookahead_ms=_int(env, "TICKWORK_LOOKAHEAD_MS", DEFAULT_LOOKAHEAD_MS),
            max_lookahead_ms=_bounded(env, "TICKWORK_MAX_LOOKAHEAD_MS", DEFAULT_MAX_LOOKAHEAD_MS, low=None,
                                      high=MAX_LOOKAHEAD_LIMIT_MS,
                                      why=" (an executor waits at most 20 s for a run's instant)"),
            prepare_runs_per_second=_int(env, "TICKWORK_PREPARE_RUNS_PER_SECOND", DEFAULT_PREPARE_RUNS_PER_SECOND),
            batch_size=_int(env, "TICKWORK_BATCH_SIZE", DEFAULT_BATCH_SIZE),
            tick_lock_ms=_int(env, "TICKWORK_TICK_LOCK_MS", DEFAULT_TICK_LOCK_MS),
            backlog_per_tenant=_bounded(env, "TICKWORK_BACKLOG_PER_TENANT", DEFAULT_BACKLOG_PER_TENANT),
            due_index_shards=_int(env, "TICKWORK_DUE_INDEX_SHARDS", DEFAULT_DUE_INDEX_SHARDS),
            min_interval_seconds=_int(env, "TICKWORK_MIN_INTERVAL_SECONDS", DEFAULT_MIN_INTERVAL_SECONDS),
            max_request_timeout_seconds=_int(
                env, "TICKWORK_MAX_REQUEST_TIMEOUT_SECONDS", DEFAULT_MAX_REQUEST_TIMEOUT_SECONDS
            ),
            retention_days=_int(env, "TICKWORK_RETENTION_DAYS", DEFAULT_RETENTION_DAYS),
            reconcile_grace_seconds=_int(env, "TICKWORK_RECONCILE_GRACE_SECONDS", DEFAULT_RECONCILE_GRACE_SECONDS),
            sweep_after_seconds=_int(env, "TICKWORK_SWEEP_AFTER_SECONDS", DEFAULT_SWEEP_AFTER_SECONDS),
            lost_margin_seconds=_int(env, "TICKWORK_LOST_MARGIN_SECONDS", DEFAULT_LOST_MARGIN_SECONDS),
            max_jobs=_int(env, "TICKWORK_MAX_JOBS", DEFAULT_MAX_JOBS),
            max_runs_per_minute=_int(env, "TICKWORK_MAX_RUNS_PER_MINUTE", DEFAULT_MAX_RUNS_PER_MINUTE),
            max_history_rows=_bounded(env, "TICKWORK_MAX_HISTORY_ROWS", DEFAULT_MAX_HISTORY_ROWS, low=0),
            max_runs_in_flight=_bounded(env, "TICKWORK_MAX_RUNS_IN_FLIGHT", DEFAULT_MAX_RUNS_IN_FLIGHT),
            max_storage_bytes=_bounded(env, "TICKWORK_MAX_STORAGE_BYTES", DEFAULT_MAX_STORAGE_BYTES, low=0),
            max_idempotency_keys=_bounded(env, "TICKWORK_MAX_IDEMPOTENCY_KEYS", DEFAULT_MAX_IDEMPOTENCY_KEYS),
            replay_per_second=_bounded(env, "TICKWORK_REPLAY_PER_SECOND", DEFAULT_REPLAY_PER_SECOND, high=1000),
            max_replays_queued=_bounded(env, "TICKWORK_MAX_REPLAYS_QUEUED", DEFAULT_MAX_REPLAYS_QUEUED, low=0),
            rate_limit_per_second=_int(env, "TICKWORK_RATE_LIMIT_PER_SECOND", DEFAULT_RATE_LIMIT_PER_SECOND),
            rate_limit_burst=_int(env, "TICKWORK_RATE_LIMIT_BURST", DEFAULT_RATE_LIMIT_BURST),
            tenant_rate_limit_per_second=_int(env, "TICKWORK_TENANT_RATE_LIMIT_PER_SECOND",
                                              DEFAULT_TENANT_RATE_LIMIT_PER_SECOND),
            tenant_rate_limit_burst=_int(env, "TICKWORK_TENANT_RATE_LIMIT_BURST", DEFAULT_TENANT_RATE_LIMIT_BURST),
            api_statement_timeout_ms=_bounded(env, "TICKWORK_API_STATEMENT_TIMEOUT_MS",
                                              DEFAULT_API_STATEMENT_TIMEOUT_MS,
                                              low=0, high=MAX_API_STATEMENT_TIMEOUT_MS,
                                              why=" (API Gateway ends a request after 29 s)"),
            database_secret_arn=env.get("DATABASE_SECRET_ARN", ""),
            database_host=env.get("DATABASE_HOST", ""),
            database_port=_int(env, "DATABASE_PORT", DEFAULT_DATABASE_PORT),
            database_name=env.get("DATABASE_NAME", ""),
            database_sslmode=sslmode,
            database_sslrootcert=_sslrootcert(env, sslmode),
            db_pool_size=_bounded(env, "TICKWORK_DB_POOL_SIZE", DEFAULT_DB_POOL_SIZE),
            redis_timeout_seconds=_bounded(env, "TICKWORK_REDIS_TIMEOUT_SECONDS", DEFAULT_REDIS_TIMEOUT_SECONDS),
            db_connect_timeout_seconds=_bounded(env, "TICKWORK_DB_CONNECT_TIMEOUT_SECONDS",
                                                DEFAULT_DB_CONNECT_TIMEOUT_SECONDS),
            db_prepared_statements=_bool(env.get("TICKWORK_DB_PREPARED_STATEMENTS"), True),
            kms_key_id=env.get("TICKWORK_KMS_KEY_ID", ""),
            key_file=env.get("TICKWORK_KEY_FILE", ""),
            operator_topic_arn=env.get("OPERATOR_TOPIC_ARN", ""),
            target_ca_bundle=_readable_file(env, "TICKWORK_TARGET_CA_BUNDLE"),
            connect_ahead=_bool(env.get("TICKWORK_CONNECT_AHEAD"), True),
            target_ports=_ports(env, "TICKWORK_TARGET_PORTS"),
            target_role_pattern=(env.get("TICKWORK_TARGET_ROLE_PATTERN") or "").strip() or DEFAULT_TARGET_ROLE_PATTERN,
            public_api_url=(env.get("TICKWORK_PUBLIC_API_URL") or "").strip().rstrip("/"),
            code_version=env.get("TICKWORK_CODE_VERSION", ""),
        )


def _sslrootcert(env: Mapping[str, str], sslmode: str) -> str:
    if sslmode not in ("verify-ca", "verify-full"):
        return ""
    return env.get("DATABASE_SSLROOTCERT") or AWS_POSTGRES_CA_BUNDLE


def _readable_file(env: Mapping[str, str], name: str) -> str:
    """A path setting that must name a readable file when set: a typo fails the cold start, not every run."""
    path = env.get(name, "")
    if path and not (os.path.isfile(path) and os.access(path, os.R_OK)):
        raise ConfigurationError(f"{name} names {path!r}, which is not a readable file")
    return path


def _ports(env: Mapping[str, str], name: str) -> tuple[int, ...]:
    """A comma-separated list of TCP ports (`80,443`), sorted and each once; empty: DEFAULT_TARGET_PORTS."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return DEFAULT_TARGET_PORTS
    try:
        ports = {int(part) for part in raw.split(",")}
    except ValueError:
        ports = {0}
    if not all(1 <= port <= 65535 for port in ports):
        raise ConfigurationError(f"{name} must be port numbers separated by commas (e.g. 80,443), got {raw!r}")
    return tuple(sorted(ports))


def _require_database(env: Mapping[str, str]) -> None:
    if env.get("DATABASE_SECRET_ARN"):
        if not env.get("DATABASE_HOST"):
            raise ConfigurationError("DATABASE_HOST is required with DATABASE_SECRET_ARN")
    elif not env.get("DATABASE_URL"):
        raise ConfigurationError("missing environment variable(s): DATABASE_URL or DATABASE_SECRET_ARN")
