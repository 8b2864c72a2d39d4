"""The `tickwork` command group: configuration once, then one subcommand per concept (tickwork_cli/commands)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import click

from tickwork_cli import __version__
from tickwork_cli.commands import completion, files, jobs, login, runs
from tickwork_cli.errors import EXIT_ERROR
from tickwork_cli.session import Session

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@contextmanager
def _usage_errors_exit_one() -> Iterator[None]:
    """Click exits 2 on a usage error; here 2 means `plan --detailed-exitcode` found changes, so errors are 1."""
    try:
        yield
    except click.UsageError as error:
        error.exit_code = EXIT_ERROR
        raise


class Group(click.Group):
    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with _usage_errors_exit_one():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with _usage_errors_exit_one():
            return super().invoke(ctx)


@click.group(cls=Group, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="tickwork")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Tickwork from the shell: jobs, their runs, and jobs kept in a file (plan/apply).

    Set TICKWORK_API_URL and TICKWORK_API_KEY, or run `tickwork login` once.
    Exit codes: 0 ok, 1 error, 2 changes found by `plan --detailed-exitcode`.
    """
    ctx.obj = Session()


cli.add_command(login.login)
cli.add_command(jobs.jobs)
cli.add_command(runs.runs)
cli.add_command(files.plan)
cli.add_command(files.apply)
cli.add_command(completion.completion)
