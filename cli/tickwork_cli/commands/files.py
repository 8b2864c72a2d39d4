"""`tickwork plan` and `tickwork apply`: jobs kept in a file, made so on the server by key."""
from __future__ import annotations

from pathlib import Path

import click

from tickwork_cli import jobfile
from tickwork_cli.errors import EXIT_CHANGES
from tickwork_cli.output import emit_json, plan_json, plan_text, step_json
from tickwork_cli.plan import AppliedWithErrors, Outcome, Plan, apply_plan, make_plan
from tickwork_cli.session import client

FILE = click.option("-f", "--file", "path", required=True, type=click.Path(dir_okay=False, path_type=Path),
                    help="The jobs file (YAML or JSON): {source: LABEL, jobs: [{key: ..., <job fields>}]}.")
PRUNE = click.option("--prune", is_flag=True,
                     help="Also delete the keyed jobs of the file's source label that the file no longer has.")
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of text.")


@click.command()
@FILE
@PRUNE
@click.option("--detailed-exitcode", is_flag=True, help="Exit 2 when there are changes (0 none, 1 error).")
@JSON
@click.pass_context
def plan(ctx: click.Context, path: Path, prune: bool, detailed_exitcode: bool, as_json: bool) -> None:
    """Show what `apply` would change: jobs to create, update (field: old → new) and, with --prune, delete."""
    jobs = jobfile.load(path)  # a bad file is an error before any configuration is needed
    found = make_plan(client(), jobs, prune)
    if as_json:
        emit_json(plan_json(found))
    else:
        click.echo(plan_text(found))
    if detailed_exitcode and found.has_changes:
        ctx.exit(EXIT_CHANGES)


@click.command()
@FILE
@PRUNE
@click.option("--yes", "-y", is_flag=True, help="Apply without asking.")
@JSON
def apply(path: Path, prune: bool, yes: bool, as_json: bool) -> None:
    """Make the jobs what the file says (PUT /jobs/by-key/KEY), after showing the plan and asking."""
    jobs = jobfile.load(path)
    api = client()
    found = make_plan(api, jobs, prune)
    if not as_json or not yes:
        click.echo(plan_text(found), err=as_json)  # with --json, stdout is kept for the JSON document
    if found.has_changes and not yes:
        click.confirm("Apply these changes?", abort=True, err=as_json)
    try:
        done = apply_plan(api, jobs, found) if found.has_changes else []
    except AppliedWithErrors as error:
        _report(found, error.done, as_json)  # what did change, before the errors
        raise
    _report(found, done, as_json)


def _report(found: Plan, done: list[Outcome], as_json: bool) -> None:
    if as_json:
        result = plan_json(found)
        result["applied"] = [{**step_json(o.step), "version": (o.job or {}).get("version"),
                              "updated_at": (o.job or {}).get("updated_at")} for o in done]
        emit_json(result)
    elif done:
        click.echo(f"Applied: {len(done)} change{'s' if len(done) != 1 else ''}.")
