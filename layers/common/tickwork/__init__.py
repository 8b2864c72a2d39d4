"""Tickwork: serverless HTTP cron. Shared package shipped as the Lambda layer."""
import os

# The release: bumped by every change an operator can see, each listed in CHANGELOG.md; shown by GET /health and
# on every log line. What one release promises the one before it: docs/deploy.md, "Releases and upgrades".
__version__ = "0.30.0"

# Each module's `Logger(child=True)` is named "<service>.<module>" when it is imported, and its records
# reach the handler's parent Logger (tickwork.logs) only under the same service: this default, set
# before any module of the package is imported, keeps the two in step where the environment (the
# template sets POWERTOOLS_SERVICE_NAME) does not.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "tickwork")
