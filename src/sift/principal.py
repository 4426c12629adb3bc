"""Who a request runs as: a caller name and class, as every front end hands it to the service."""

from __future__ import annotations

from dataclasses import dataclass

from sift.config import RESERVED_CALLER, CallerClass


@dataclass(frozen=True)
class Principal:
    """A caller. ``allow_private`` overrides the class setting (only the in-process operator)."""

    name: str
    caller_class: CallerClass
    allow_private: bool | None = None


ANONYMOUS = Principal("anonymous", "restricted")
# The in-process CLI acts as the operator: fleet, and trusted to reach private addresses.
OPERATOR = Principal(RESERVED_CALLER, "fleet", allow_private=True)
