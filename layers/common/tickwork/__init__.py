"""Tickwork: serverless HTTP cron. Shared package shipped as the Lambda layer."""
import os

# Each module's `Logger(child=True)` is named "<service>.<module>" when it is imported, and its records
# reach the handler's parent Logger (tickwork.logs) only under the same service: this default, set
# before any module of the package is imported, keeps the two in step where the environment (the
# template sets POWERTOOLS_SERVICE_NAME) does not.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "tickwork")
