"""`tickwork completion SHELL`: the shell's completion script, from Click's own completion support."""
from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VARIABLE = "_TICKWORK_COMPLETE"


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    bash: eval "$(tickwork completion bash)"   (in ~/.bashrc)
    zsh:  eval "$(tickwork completion zsh)"    (in ~/.zshrc)
    fish: tickwork completion fish > ~/.config/fish/completions/tickwork.fish
    """
    root = ctx.find_root()
    complete = get_completion_class(shell)
    assert complete is not None  # every name in SHELLS is one of Click's
    click.echo(complete(root.command, {}, "tickwork", COMPLETE_VARIABLE).source())
