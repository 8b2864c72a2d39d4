"""The committed copy of the OpenAPI document (docs/openapi.json): `make openapi` writes it, a test keeps
it equal to what GET /openapi.json serves. Sorted keys and a fixed indent, so a diff shows real changes."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tickwork.api.app import openapi_json


def committed_text() -> str:
    return json.dumps(json.loads(openapi_json()), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tickwork.api.spec PATH", file=sys.stderr)
        return 2
    target = Path(argv[0])
    partial = target.with_suffix(target.suffix + ".tmp")
    partial.write_text(committed_text(), encoding="utf-8")
    partial.replace(target)  # never a half-written document
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
