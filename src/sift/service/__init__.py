"""The fetch service: validate → cache → fetch → render → cap, one module per stage.

Front ends (the API, the CLI, the batch runner, the crawler, MCP) import ``Service`` from
here; ``pipeline.py`` says how the stages fit together.
"""

from sift.service.pipeline import Service

__all__ = ["Service"]
