"""A stand-in for the Lambda context object, so handlers (and Powertools) find the attributes they read."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

# Region and account only shape the ARN: nothing local calls AWS.
_ARN_PREFIX = "arn:aws:lambda:local:123456789012:function:"


@dataclass
class LocalContext:
    function_name: str
    timeout_seconds: float
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    _deadline: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_seconds

    @property
    def invoked_function_arn(self) -> str:
        return _ARN_PREFIX + self.function_name

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    @property
    def log_stream_name(self) -> str:
        return "local"

    def get_remaining_time_in_millis(self) -> int:
        """Informational only: the local runtime does not kill a handler that runs past its timeout."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))
