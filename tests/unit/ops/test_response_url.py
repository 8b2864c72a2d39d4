"""Where a custom resource's answer may go (tickwork.ops.response_url): CloudFormation's response bucket of the
function's region and partition, over https, in the host forms AWS's pre-signed URLs take."""
from __future__ import annotations

import pytest

from tickwork.ops.response_url import ResponseHosts

BUCKET = "cloudformation-custom-resource-response-"
KEY = ("/arn%3Aaws%3Acloudformation%3Aeu-west-3%3A123456789012%3Astack/reports/7c1d%7CNightlyReport%7C2b7e"
       "?X-Amz-Signature=0")


@pytest.mark.parametrize("region, url", [
    ("eu-west-3", f"https://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com{KEY}"),
    ("eu-west-3", f"https://{BUCKET}euwest3.s3-eu-west-3.amazonaws.com{KEY}"),
    ("eu-west-3", f"https://{BUCKET}euwest3.s3.amazonaws.com{KEY}"),
    ("eu-west-3", f"https://{BUCKET.upper()}EUWEST3.S3.EU-WEST-3.AMAZONAWS.COM:443{KEY}"),
    ("us-east-1", f"https://{BUCKET}useast1.s3.amazonaws.com{KEY}"),
    ("ap-southeast-2", f"https://{BUCKET}apsoutheast2.s3.ap-southeast-2.amazonaws.com{KEY}"),
    ("cn-north-1", f"https://{BUCKET}cnnorth1.s3.cn-north-1.amazonaws.com.cn{KEY}"),
    ("cn-northwest-1", f"https://{BUCKET}cnnorthwest1.s3-cn-northwest-1.amazonaws.com.cn{KEY}"),
    ("us-gov-west-1", f"https://{BUCKET}usgovwest1.s3-us-gov-west-1.amazonaws.com{KEY}"),
    ("us-gov-east-1", f"https://{BUCKET}usgoveast1.s3.us-gov-east-1.amazonaws.com{KEY}"),
    ("", f"https://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com{KEY}"),  # outside Lambda: any region
    ("", f"https://{BUCKET}cnnorth1.s3.cn-north-1.amazonaws.com.cn{KEY}"),
    ("", f"https://{BUCKET}useast1.s3.amazonaws.com{KEY}"),
])
def test_cloudformations_response_hosts_are_answered(region: str, url: str) -> None:
    assert ResponseHosts(region).refusal(url) is None


@pytest.mark.parametrize("region, url, why", [
    ("eu-west-3", f"http://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com{KEY}", "not an https URL"),
    ("eu-west-3", f"https://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com:8443{KEY}", "not an https URL"),
    ("eu-west-3", f"https://user@{BUCKET}euwest3.s3.eu-west-3.amazonaws.com{KEY}", "not an https URL"),
    ("eu-west-3", f"https://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com@169.254.169.254/latest", "not an https URL"),
    ("eu-west-3", f"https://169.254.169.254\\@{BUCKET}euwest3.s3.eu-west-3.amazonaws.com/", "printable ASCII"),
    ("eu-west-3", f"https://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com {KEY}", "printable ASCII"),
    ("eu-west-3", "", "printable ASCII"),
    ("eu-west-3", f"https://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com{KEY}\n", "printable ASCII"),
    # another region's bucket, or a bucket naming a region its host does not
    ("eu-west-3", f"https://{BUCKET}euwest1.s3.eu-west-1.amazonaws.com{KEY}", "for region eu-west-3"),
    ("eu-west-3", f"https://{BUCKET}euwest1.s3.amazonaws.com{KEY}", "for region eu-west-3"),
    ("", f"https://{BUCKET}euwest3.s3.eu-west-1.amazonaws.com{KEY}", "for any region"),
    # the partition's suffix, and no global endpoint outside partition aws
    ("cn-north-1", f"https://{BUCKET}cnnorth1.s3.cn-north-1.amazonaws.com{KEY}", "response bucket"),
    ("eu-west-3", f"https://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com.cn{KEY}", "response bucket"),
    ("cn-north-1", f"https://{BUCKET}cnnorth1.s3.amazonaws.com{KEY}", "response bucket"),
    ("us-gov-west-1", f"https://{BUCKET}usgovwest1.s3.amazonaws.com{KEY}", "response bucket"),
    # lookalikes: another bucket, another domain, a bucket name no region has
    ("eu-west-3", f"https://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com.example.com{KEY}", "response bucket"),
    ("eu-west-3", f"https://evil-{BUCKET}euwest3.s3.eu-west-3.amazonaws.com{KEY}", "response bucket"),
    ("eu-west-3", f"https://s3.eu-west-3.amazonaws.com/{BUCKET}euwest3{KEY}", "response bucket"),
    ("", f"https://{BUCKET}mine.s3.amazonaws.com{KEY}", "response bucket"),
    ("", f"https://{BUCKET}usisoeast1.s3.us-iso-east-1.c2s.ic.gov{KEY}", "response bucket"),
    ("eu-west-3", "https://127.0.0.1/response", "response bucket"),
])
def test_anything_else_is_refused_naming_response_url(region: str, url: str, why: str) -> None:
    refused = ResponseHosts(region).refusal(url)
    assert refused is not None and refused.startswith("ResponseURL: ") and why in refused, refused


def test_the_reason_shows_a_forged_host_cut_short_and_never_the_signature() -> None:
    refused = ResponseHosts("eu-west-3").refusal(f"https://{'a' * 300}.example.com/")
    assert refused is not None and len(refused) < 200
    insecure = ResponseHosts("eu-west-3").refusal(f"http://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com{KEY}")
    assert insecure is not None and "X-Amz-Signature" not in insecure and "euwest3" in insecure


def test_a_tests_origin_is_answered_only_as_given() -> None:
    hosts = ResponseHosts("eu-west-3", also=("http://127.0.0.1:8123",))
    assert hosts.refusal("http://127.0.0.1:8123/response?X-Amz-Signature=0") is None
    assert hosts.refusal(f"https://{BUCKET}euwest3.s3.eu-west-3.amazonaws.com{KEY}") is None
    for other in ("http://127.0.0.1:8124/response", "https://127.0.0.1:8123/response",
                  "http://user@127.0.0.1:8123/response", "http://localhost:8123/response"):
        assert hosts.refusal(other) is not None, other
