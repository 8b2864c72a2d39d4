"""The AWS kinds of target (issue #35): a job's `target`, shaped as EventBridge Scheduler's Target (spec), called
with the job's role assumed (credentials), its input rendered per attempt (rendering), through one kind per
service (services), each an attempt made at its instant on a thread of the executor's (calls)."""
