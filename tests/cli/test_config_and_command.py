"""Configuration (environment first, then the login file, kept 0600) and the command's exit codes and help."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from tickwork_cli import config
from tickwork_cli.main import cli


def test_environment_variables_win_over_the_file_setting_by_setting(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    config.save(path, config.Config("https://saved.example", "tw_saved"))

    assert config.resolve({}, path) == config.Config("https://saved.example", "tw_saved")
    assert config.resolve({"TICKWORK_API_KEY": "tw_env"}, path) == config.Config("https://saved.example", "tw_env")
    assert config.resolve({"TICKWORK_API_URL": "https://env.example", "TICKWORK_API_KEY": ""}, path).api_key == "tw_saved"


def test_the_file_is_written_readable_by_its_owner_only_even_over_a_wider_one(tmp_path: Path) -> None:
    path = tmp_path / "tickwork" / "config.json"
    path.parent.mkdir()
    path.write_text("{}")
    path.chmod(0o644)

    config.save(path, config.Config("https://a.example", "tw_key"))

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"api_url": "https://a.example", "api_key": "tw_key"}


def test_nothing_configured_is_an_error_saying_what_to_set(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["jobs", "list"], env={"XDG_CONFIG_HOME": str(tmp_path),
                                                             "TICKWORK_API_URL": None, "TICKWORK_API_KEY": None})

    assert result.exit_code == 1
    assert "no API URL: set TICKWORK_API_URL or run `tickwork login --api-url URL`" in result.output


@pytest.mark.parametrize("args", [["jobs", "lis"], ["plan"], ["runs", "list", "--status", "done"], ["--nope"]])
def test_a_usage_error_exits_1_since_2_means_changes(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 1, result.output
    assert "Error:" in result.output


@pytest.mark.parametrize("args", [[], ["jobs"], ["jobs", "list"], ["jobs", "get"], ["jobs", "pause"], ["jobs", "resume"],
                                  ["jobs", "run"], ["jobs", "delete"], ["runs"], ["runs", "list"], ["runs", "show"],
                                  ["runs", "tail"], ["plan"], ["apply"], ["login"], ["completion"]])
def test_every_command_has_help(args: list[str]) -> None:
    result = CliRunner().invoke(cli, [*args, "--help"], prog_name="tickwork")

    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: tickwork {' '.join(args)}".rstrip())


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -o nosort -F"), ("zsh", "compdef"),
                                               ("fish", "complete --no-files --command tickwork")])
def test_completion_prints_the_shells_script(shell: str, marker: str) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])

    assert result.exit_code == 0
    assert marker in result.output and "_TICKWORK_COMPLETE" in result.output


def test_shell_completion_completes_subcommands() -> None:
    result = CliRunner().invoke(cli, [], env={"_TICKWORK_COMPLETE": "bash_complete", "COMP_WORDS": "tickwork ru",
                                              "COMP_CWORD": "1"}, prog_name="tickwork")

    assert result.output.split() == ["plain,runs"]
