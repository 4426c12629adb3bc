"""Compact JSON, the way every sift front end writes it (UTF-8, no spaces, no NaN)."""

from __future__ import annotations

import json
from typing import Any

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(obj: Any) -> bytes:
    return _encoder.encode(obj).encode("utf-8")
