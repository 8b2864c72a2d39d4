"""`python -m tickwork_cli`, the same command as the `tickwork` script."""
from tickwork_cli.main import cli

cli(prog_name="tickwork")
