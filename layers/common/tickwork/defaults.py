"""What a job gets for a policy it does not set, and what a job stored before a field existed keeps. The one
place these values are written: the API's models, the typed job (tickwork.models) and the rules read them here."""
from __future__ import annotations

from tickwork.vocab import Catchup, Jitter, OnExcluded, Overlap

TIMEZONE = "UTC"
OVERLAP = Overlap.ALLOW  # a run due while the previous one is in progress runs too: what plain cron does
CATCHUP = Catchup.LATEST  # after an outage, one run for the slots missed, not a burst
# Long enough to ride out a poller restart or a Redis failover, short enough that a run an hour late
# (usually worse than no run) is recorded missed instead.
CATCHUP_WINDOW_SECONDS = 300
SPREAD_SECONDS = 0  # runs at the instants the schedule names unless asked to spread
ON_EXCLUDED = OnExcluded.SKIP  # a slot on an excluded date is recorded skipped, not moved

# Long enough for a slow webhook, well short of the executor's own cap (settings.max_request_timeout_seconds).
REQUEST_TIMEOUT_SECONDS = 30
NOTIFY_ON = ("failure", "recovery", "paused")  # a job that asks for notifications hears of every kind

RETRY_STRATEGY = "exponential"
RETRY_MAX_ATTEMPTS = 3
RETRY_DELAY_SECONDS = 10
# New jobs spread their retries (full jitter: a failing target is not hit by every job at once) and keep
# them under an hour apart and before their next slot...
RETRY_JITTER = Jitter.FULL
RETRY_MAX_DELAY_SECONDS = 3600
RETRY_PAST_NEXT_RUN = False
# ...while a job stored before these fields existed keeps the timing it had: exact delays, a day's
# ceiling, retries past its next slot.
STORED_RETRY_JITTER = Jitter.NONE
STORED_RETRY_MAX_DELAY_SECONDS = 86_400
STORED_RETRY_PAST_NEXT_RUN = True

# An hour when a callback-mode job does not say: long enough for most batch work, short enough to notice a
# lost worker.
COMPLETION_TIMEOUT_SECONDS = 3600
