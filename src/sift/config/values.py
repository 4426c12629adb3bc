"""What every settings section shares: a field's doc metadata and the value parsers.

``doc`` is the ``metadata`` of each dataclass field (its documentation line and whether it
is a byte size); ``coerce`` turns a TOML value, or an environment/flag string, into the
field's type. Sections and the loader import from here; nothing here imports a section.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, get_args, get_origin

from sift.errors import ConfigError

_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "KiB": 1 << 10,
    "MiB": 1 << 20,
    "GiB": 1 << 30,
    "TiB": 1 << 40,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGT]i?B|B)?\s*$")


def doc(text: str, *, size: bool = False) -> dict[str, Any]:
    """A field's metadata: its documentation line, and ``size`` for byte counts."""
    return {"doc": text, "size": size}


def parse_size(value: object) -> int:
    """``65536``, ``"64KiB"``, ``"1GiB"``, ``"10MB"`` → bytes. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError('expected a size such as 65536 or "64KiB"')
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a size cannot be negative")
        return value
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m:
            return int(m.group(1)) * _SIZE_UNITS[m.group(2) or ""]
    raise ValueError(f'bad size {value!r}: use an integer or a string like "64KiB", "1GiB"')


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad listen address {value!r}: use HOST:PORT, e.g. 127.0.0.1:8080")
    return host.strip("[]"), int(port)


def coerce(value: Any, tp: Any, size: bool, from_text: bool) -> Any:
    """Convert a TOML value (or an env/flag string when ``from_text``) to the field's type."""
    if size:
        return parse_size(int(value) if from_text and str(value).strip().isdigit() else value)
    if tp is bool:
        if from_text and isinstance(value, str):
            low = value.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
        if isinstance(value, bool):
            return value
        raise ValueError(f"expected true or false, got {value!r}")
    if tp is int:
        if from_text and isinstance(value, str):
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if from_text and isinstance(value, str):
            value = float(value.strip())
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {value!r}")
        return value
    if get_origin(tp) is tuple:
        item_tp = get_args(tp)[0]
        if from_text and isinstance(value, str):
            value = [v for v in (p.strip() for p in value.split(",")) if v]
        if not isinstance(value, list | tuple):
            raise ValueError(f"expected a list, got {value!r}")
        return tuple(coerce(v, item_tp, False, from_text) for v in value)
    raise ValueError("cannot be set from the environment or a flag; use the config file")


def check_cidr(cidr: str, where: str, key: str) -> None:
    try:
        ipaddress.ip_network(cidr, strict=False)
    except ValueError as exc:
        raise ConfigError(f"{where}: {key}: bad CIDR {cidr!r}") from exc


def check_positive(section: object, names: tuple[str, ...], where: str, prefix: str) -> None:
    """Each of ``names`` on ``section`` is above 0, else ``{prefix}{name}: must be positive``."""
    for fname in names:
        if getattr(section, fname) <= 0:
            raise ConfigError(f"{where}: {prefix}{fname}: must be positive")
