"""A jobs file (docs/jobs-as-code.md): `{"source": "<label>", "jobs": [{"key": ..., <job fields>}, ...]}`.

Checked here before anything is sent: its shape (a source label, a list of jobs, each with a key, no key
twice), and that no sensitive header holds a literal value. The job fields themselves are the API's to judge
(its 400 names the field). YAML, which includes JSON, read with `yaml.safe_load`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tickwork_cli.errors import CliError

# The API's rule for a job's key (a key is also a URL path segment: /jobs/by-key/{key}).
KEY = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
# As the server judges header names (tickwork/http/redaction.py `is_sensitive_header`; a test holds them equal).
SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"})
SENSITIVE_PARTS = ("token", "secret", "key", "password", "passwd", "auth", "cookie", "credential", "signature")
# As the server spells a reference (tickwork/secrets/interpolation.py).
_REFERENCE = r"\$\{secrets\.[A-Za-z_][A-Za-z0-9_]{0,63}\}"
# A sensitive value may hold references and nothing secret around them: an auth scheme first (`Bearer `),
# names before `=` (`session=${secrets.S}` in a Cookie), and separators between references.
_REFERENCES_ONLY = re.compile(
    rf"^(?:[A-Za-z][A-Za-z0-9._~+/-]*[ ]+)?(?:[;,: ]*(?:[A-Za-z0-9_.-]+=)?{_REFERENCE})+[;, ]*$")


class JobFileError(CliError):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class JobFile:
    source: str
    jobs: dict[str, dict[str, Any]]  # key -> the job's body as the API takes it, `key` and `source` in it


def is_sensitive_header(name: str) -> bool:
    lower = name.lower()
    return lower in SENSITIVE_HEADERS or any(part in lower for part in SENSITIVE_PARTS)


def load(path: Path) -> JobFile:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CliError(f"cannot read {path}: {error}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise CliError(f"{path} is not valid YAML: {error}") from None
    return parse(data)


def parse(data: Any) -> JobFile:
    if not isinstance(data, dict):
        raise JobFileError("file", "must be a mapping with `source` and `jobs`")
    unknown = sorted(set(map(str, data)) - {"source", "jobs"})
    if unknown:
        raise JobFileError(unknown[0], "unknown top-level field (a file has `source` and `jobs`)")
    source = data.get("source")
    if not isinstance(source, str) or not source.strip():
        raise JobFileError("source", "required: a label naming this file, stored on the jobs it manages")
    if not isinstance(data.get("jobs"), list):
        raise JobFileError("jobs", "required: a list of jobs, each with a `key`")
    jobs: dict[str, dict[str, Any]] = {}
    for index, job in enumerate(data["jobs"]):
        key = _key(index, job)
        if key in jobs:
            raise JobFileError(f"job {key}", "key: appears twice in the file; keys must be unique")
        jobs[key] = _body(key, job, source)
    return JobFile(source, jobs)


def _key(index: int, job: Any) -> str:
    if not isinstance(job, dict):
        raise JobFileError(f"jobs[{index}]", "must be a mapping of job fields")
    key = job.get("key")
    if not isinstance(key, str):
        raise JobFileError(f"jobs[{index}]", "key: required, a string like nightly-report")
    if not KEY.match(key):
        raise JobFileError(f"jobs[{index}]", "key: 1-128 characters of a-z 0-9 . _ -, starting with a letter or digit")
    return key


def _body(key: str, job: dict[str, Any], source: str) -> dict[str, Any]:
    if job.get("source", source) != source:
        raise JobFileError(f"job {key}", "source: set once for the whole file, at its top level")
    request = job.get("request")
    headers = request.get("headers") if isinstance(request, dict) else None
    if isinstance(headers, dict):
        for name, value in headers.items():
            _check_header(key, str(name), value)
    return {**job, "source": source}


def _check_header(key: str, name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise JobFileError(f"job {key}", f"request.headers.{name}: must be a string")
    if value and is_sensitive_header(name) and not _REFERENCES_ONLY.match(value):
        raise JobFileError(f"job {key}", f"request.headers.{name} holds a literal value; store it as a secret "
                           "(PUT /secrets/NAME) and write ${secrets.NAME}")
