"""Settings: one frozen tree, loaded from TOML, then ``SIFT_*`` environment, then CLI flags.

The dataclasses are the single settings table: every field's TOML key, environment
variable (``SIFT_`` + the dotted key upper-cased with dots as underscores, e.g.
``SIFT_CLASSES_FLEET_OUTPUT_CAP``), ``--set KEY=VALUE`` flag and documentation entry are
derived from them (see ``iter_fields``); ``docs/configuration.md`` is checked against it.

Loading never half-succeeds: any problem raises ``ConfigError`` with one line naming the
file, the key and the reason, which the CLI prints before exiting with status 2.

One module per section holds its dataclass, defaults and rules (``cache``, ``batch``,
``store``, ``classes``, ``egress``, ``listener``, ``browser``, ``callers``,
``webhooks``, ``watch``); ``settings``
ties them into ``Settings``, ``table`` flattens it, ``loader`` reads it, ``values`` holds
the parsers they share. Import the names from ``sift.config``.
"""

from sift.config.batch import BatchSettings
from sift.config.browser import BrowserSettings
from sift.config.cache import CacheSettings
from sift.config.callers import RESERVED_CALLER, Caller
from sift.config.classes import (
    CALLER_CLASSES,
    MAX_ACTION_STEPS,
    CallerClass,
    ClassesSettings,
    ClassSettings,
)
from sift.config.egress import EgressSettings
from sift.config.history import HistorySettings
from sift.config.listener import ListenerSettings
from sift.config.loader import CONFIG_ENV, DEFAULT_CONFIG_FILE, config_path, load_settings
from sift.config.settings import Settings, validate
from sift.config.store import StoreSettings
from sift.config.table import FieldInfo, iter_fields
from sift.config.values import parse_listen, parse_size
from sift.config.watch import WatchSettings
from sift.config.webhooks import WebhooksSettings

__all__ = [
    "CALLER_CLASSES",
    "CONFIG_ENV",
    "DEFAULT_CONFIG_FILE",
    "MAX_ACTION_STEPS",
    "RESERVED_CALLER",
    "BatchSettings",
    "BrowserSettings",
    "CacheSettings",
    "Caller",
    "CallerClass",
    "ClassSettings",
    "ClassesSettings",
    "EgressSettings",
    "FieldInfo",
    "HistorySettings",
    "ListenerSettings",
    "Settings",
    "StoreSettings",
    "WatchSettings",
    "WebhooksSettings",
    "config_path",
    "iter_fields",
    "load_settings",
    "parse_listen",
    "parse_size",
    "validate",
]
