"""Where a custom resource's answer may go: CloudFormation's response bucket, over https. Pure: no I/O.

CloudFormation puts a pre-signed S3 PUT URL in each event (`ResponseURL`), on the bucket
`cloudformation-custom-resource-response-<region without dashes>` of the stack's region, which is the
function's own (a ServiceToken must be in the stack's region). An event sent straight to the function
(`lambda:InvokeFunction`) may carry any URL: answering it would PUT from inside the VPC to a host of the
sender's choosing. So only these hosts are answered, `<bucket>` being the region's:

    <bucket>.s3.<region>.<suffix>   the regional endpoint
    <bucket>.s3-<region>.<suffix>   its older spelling
    <bucket>.s3.amazonaws.com       the global endpoint (partition aws only)

`<suffix>` is the region's partition's: `amazonaws.com.cn` for `cn-*` (aws-cn), `amazonaws.com` for the
others (aws, aws-us-gov). Other partitions (the isolated ones, the European Sovereign Cloud) are refused.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

BUCKET_PREFIX = "cloudformation-custom-resource-response-"
_REGION = re.compile(r"^[a-z]{2}(?:-gov)?-[a-z]+-\d{1,2}$")
_FLAT_REGION = re.compile(r"^[a-z]{2}(?:gov)?[a-z]+\d{1,2}$")
_HOST = re.compile(
    rf"^{re.escape(BUCKET_PREFIX)}(?P<flat>[a-z0-9]+)\."
    r"(?:s3[.-](?P<region>[a-z0-9-]+)\.(?P<suffix>amazonaws\.com(?:\.cn)?)|s3\.amazonaws\.com)$")
# What a URL may hold, unescaped (RFC 3986's unreserved and reserved characters, and %): a backslash, a
# space or a control character is where two URL parsers could disagree on the host.
_URL_CHARACTERS = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+$")
_MAX_SHOWN = 100


@dataclass(frozen=True)
class ResponseHosts:
    """`region`: the function's own (settings.function_region); empty outside Lambda, where any region of
    the partitions above is taken. `also`: origins (`http://127.0.0.1:8123`) answered besides, for the tests'
    local servers; the Lambda handlers never set it, and nothing in an event can."""

    region: str = ""
    also: tuple[str, ...] = ()

    def refusal(self, url: str) -> str | None:
        """Why CloudFormation's answer may not be sent to `url`, naming ResponseURL; None when it may."""
        from urllib3.util import parse_url  # the parser of the client that sends the answer

        if not _URL_CHARACTERS.fullmatch(url):
            return "ResponseURL: not a URL of printable ASCII characters"
        parsed = parse_url(url)
        origin = f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port else "")
        if origin in self.also and parsed.auth is None:
            return None
        if parsed.scheme != "https" or parsed.auth is not None or parsed.port not in (None, 443):
            # The origin only: the rest of a pre-signed URL is a credential to answer that request.
            return f"ResponseURL: not an https URL on the default port without credentials ({_shown(origin)})"
        if not _bucket_host(parsed.host or "", self.region):
            where = f"region {self.region}" if self.region else "any region"
            return (f"ResponseURL: {_shown(parsed.host or '')} is not CloudFormation's response bucket for "
                    f"{where}")
        return None


def _bucket_host(host: str, region: str) -> bool:
    found = _HOST.fullmatch(host.lower())
    if found is None:
        return False
    named = found["region"]
    if named is None:  # the global endpoint, partition aws only: the bucket alone names the region
        return not region.startswith(("cn-", "us-gov-")) and (
            found["flat"] == _flat(region) if region else _FLAT_REGION.fullmatch(found["flat"]) is not None)
    return (_REGION.fullmatch(named) is not None and named == (region or named) and found["flat"] == _flat(named)
            and found["suffix"] == partition_suffix(named))


def partition_suffix(region: str) -> str:
    """The DNS suffix of the region's partition."""
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def _flat(region: str) -> str:
    return region.replace("-", "")


def _shown(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."
