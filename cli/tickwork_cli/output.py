"""What commands print: JSON for scripts (`--json`), text for people, times in the chosen zone."""
from __future__ import annotations

import json
from datetime import timezone, tzinfo
from typing import Any

import click

from tickwork_cli.plan import ACTIONS, DELETE, Change, Plan, Step

_SIGNS = {"create": "+", "update": "~", "delete": "-", "unchanged": "="}
_REDACTED = "***"
_UNCOMPARED = "  (sealed: not compared, the key lacks jobs:write)"


def zone(utc: bool) -> tzinfo | None:
    """The zone times are shown in: UTC with `--utc`, else the user's (None: the local zone)."""
    return timezone.utc if utc else None


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def plan_json(plan: Plan) -> dict[str, Any]:
    return {"source": plan.source, "changed": plan.has_changes,
            "summary": {action: plan.count(action) for action in ACTIONS},
            "jobs": [step_json(step) for step in plan.steps]}


def step_json(step: Step) -> dict[str, Any]:
    data: dict[str, Any] = {"key": step.key, "action": step.action, "job_id": step.job_id,
                            "changes": [change_json(c) for c in step.changes]}
    if step.action == DELETE:
        data["name"] = step.name
    return data


def change_json(change: Change) -> dict[str, Any]:
    """`compared` only when false: a sealed value the key may not compare."""
    data = {"field": change.field, "old": change.old, "new": change.new}
    return data if change.compared else {**data, "compared": False}


def plan_text(plan: Plan) -> str:
    lines = [f"Jobs of source {plan.source}:"]
    for step in plan.steps:
        lines.append(f"  {_SIGNS[step.action]} {step.action:<9} {step.key}" + (f"  ({step.name})" if step.name else ""))
        lines.extend(f"      {c.field}: {_value(c.old)} → {_value(c.new)}{'' if c.compared else _UNCOMPARED}"
                     for c in step.changes)
    lines.append(summary(plan))
    return "\n".join(lines)


def summary(plan: Plan) -> str:
    if not plan.has_changes:
        return "No changes: the jobs match the file."
    return (f"Plan: {plan.count('create')} to create, {plan.count('update')} to update, "
            f"{plan.count(DELETE)} to delete, {plan.count('unchanged')} unchanged.")


def _value(value: Any) -> str:
    return _REDACTED if value == _REDACTED else json.dumps(value, ensure_ascii=False, sort_keys=True)
