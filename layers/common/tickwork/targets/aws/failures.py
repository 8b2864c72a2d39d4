"""What a failed call to an AWS service means for the attempt: its failure kind, and the error history keeps.

The text names the action and the service's error code (and, for a refusal, the role), never the service's message
nor the endpoint: a message may quote the input, which may hold a secret. Denied is refused (the role's policy says
no and would again); throttled, a 5xx or credentials that expired under the call are transient (the job's retry
policy tries again); any other 4xx is rejected; no answer is a connection failure or a timeout.
"""
from __future__ import annotations

from typing import Any

from botocore.exceptions import (ClientError, ConnectTimeoutError, EndpointConnectionError,
                                 ParamValidationError, ReadTimeoutError)

from tickwork.outcome import Failure, FailureKind

DENIED = frozenset({"AccessDenied", "AccessDeniedException", "AuthorizationError", "AuthorizationErrorException",
                    "KMSAccessDeniedException", "KMS.AccessDeniedException", "KmsAccessDeniedException",
                    "NotAuthorizedForSourceException", "UnauthorizedOperation"})
THROTTLED = frozenset({"Throttling", "ThrottlingException", "ThrottledException", "TooManyRequestsException",
                       "RequestLimitExceeded", "RequestThrottled", "RequestThrottledException",
                       "SlowDown", "KMSThrottlingException", "KMS.KMSThrottlingException",
                       "EC2ThrottledException", "ServiceUnavailable", "ServiceUnavailableException",
                       "InternalFailure", "InternalError", "InternalErrorException", "InternalException",
                       "ServiceException", "RequestTimeout", "RequestTimeoutException"})
# The call's credentials are no longer good (expired, or a session revoked): a new session may succeed.
EXPIRED = frozenset({"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
                     "RequestExpired"})


def of_exception(exc: Exception, action: str, role_arn: str) -> Failure:
    """What a call's exception means (botocore's, or any other: a connection failure)."""
    code = error_code(exc)
    if code is not None:
        return of_code(code, action, role_arn, http_status(exc))
    if isinstance(exc, ReadTimeoutError):
        return Failure(FailureKind.TIMEOUT, f"{action} timed out waiting for the answer")
    if isinstance(exc, ParamValidationError):  # its report may quote the input: kept out
        return Failure(FailureKind.REFUSED, f"refused: {action}'s parameters are invalid")
    if isinstance(exc, (ConnectTimeoutError, EndpointConnectionError)):
        return Failure(FailureKind.CONNECTION, f"{action} failed: could not connect to the service")
    return Failure(FailureKind.CONNECTION, f"{action} failed: {type(exc).__name__}")


def of_code(code: str, action: str, role_arn: str, status: int | None = None) -> Failure:
    """What the service's error `code` (and its HTTP status, when it answered one) means."""
    said = f"{code} (HTTP {status})" if status else code
    if code in DENIED or (status == 403 and code not in EXPIRED):
        return Failure(FailureKind.REFUSED, f"refused: role {role_arn} may not call {action} ({said})")
    if code in THROTTLED or code in EXPIRED or status == 429 or (status or 0) >= 500:
        return Failure(FailureKind.TRANSIENT_STATUS, f"{action} failed: {said}")
    return Failure(FailureKind.REJECTED_STATUS, f"{action} failed: {said}")


def expired(exc: Exception) -> bool:
    """Whether the call failed for its credentials, which are then not to be used again."""
    return error_code(exc) in EXPIRED


def error_code(exc: Exception) -> str | None:
    """The service's error code, if it answered one."""
    if not isinstance(exc, ClientError):
        return None
    return str(exc.response.get("Error", {}).get("Code") or "UnknownError")


def http_status(exc: Exception) -> int | None:
    """The HTTP status of the service's answer, if it answered."""
    if not isinstance(exc, ClientError):
        return None
    status: Any = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None
