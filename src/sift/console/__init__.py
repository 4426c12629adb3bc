"""The web console: a browser front end over the public API, served by ``sift serve``."""

from sift.console.routes import install_console

__all__ = ["install_console"]
