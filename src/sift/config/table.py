"""The settings table: every scalar setting flattened, with its key, env var, type and doc.

``iter_fields`` walks the ``Settings`` tree; the loader maps ``SIFT_*`` variables and
``--set`` keys through it, and the docs-sync test checks ``docs/configuration.md`` against it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, get_args, get_origin, get_type_hints

from sift.config.callers import Caller
from sift.config.settings import Settings


@dataclass(frozen=True)
class FieldInfo:
    key: str  # dotted TOML key, e.g. "classes.fleet.output_cap"
    env: str  # environment variable
    type_name: str
    default: Any
    doc: str
    size: bool


def is_section(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp) and tp is not Caller


def iter_fields(cls: type = Settings, prefix: str = "", default: Any = None) -> Iterator[FieldInfo]:
    """Every scalar setting with its key, env var, default and doc (nested sections flattened)."""
    instance = default if default is not None else cls()
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        key = f"{prefix}{f.name}"
        value = getattr(instance, f.name)
        if is_section(tp):
            yield from iter_fields(tp, key + ".", value)
            continue
        yield FieldInfo(
            key=key,
            env="SIFT_" + key.upper().replace(".", "_"),
            type_name=_type_name(tp, f.metadata.get("size", False)),
            default=value,
            doc=f.metadata.get("doc", ""),
            size=f.metadata.get("size", False),
        )


def _type_name(tp: Any, size: bool) -> str:
    if size:
        return "size"
    if tp is bool:
        return "bool"
    if tp in (int, float, str):
        return str(tp.__name__)
    origin = get_origin(tp)
    if origin is tuple:
        return f"list of {_type_name(get_args(tp)[0], False)}"
    return "table"
