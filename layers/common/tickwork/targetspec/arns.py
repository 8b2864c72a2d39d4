"""ARNs of what an AWS target calls and of the roles it is called with. Pure.

An ARN is `arn:partition:service:region:account:resource`; a role's has no region (`arn:aws:iam::123456789012:
role/path/name`). Only the shapes Tickwork calls are parsed here; the services check the rest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_ARN = re.compile(r"^arn:(?P<partition>aws[a-z-]*):(?P<service>[a-z0-9-]+):(?P<region>[a-z0-9-]*):"
                  r"(?P<account>\d{12}):(?P<resource>.+)$")
# IAM's characters for a role's path and name (a path is `/` or `/a/b/`; a name at most 64 characters).
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}$")
MAX_ARN_CHARS = 2048


@dataclass(frozen=True)
class Arn:
    partition: str
    service: str
    region: str
    account: str
    resource: str


def parse(text: str) -> Arn | None:
    """The parts of `text`, or None if it is not an ARN of a regional resource (region and account given)."""
    if len(text) > MAX_ARN_CHARS:
        return None
    match = _ARN.match(text)
    if match is None or not match["region"]:
        return None
    return Arn(match["partition"], match["service"], match["region"], match["account"], match["resource"])


def service_of(text: str) -> str | None:
    """The service an ARN names (`sqs`, `lambda`, ...), or None if it is not an ARN of a regional resource."""
    arn = parse(text)
    return None if arn is None else arn.service


def is_role_arn(text: str) -> bool:
    return len(text) <= MAX_ARN_CHARS and ROLE_ARN.match(text) is not None


def matches(pattern: str, arn: str) -> bool:
    """Whether `arn` matches `pattern` as an IAM policy's Resource does: `*` any characters, `?` any one."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, arn) is not None
