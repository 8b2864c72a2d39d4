"""Tickwork: serverless HTTP cron. Shared package shipped as the Lambda layer."""
