"""Worker processes for CPU-bound, caller-shaped work (rendering), under hard limits.

Kept apart from ``render/`` so a worker can limit its own memory *before* it imports the
renderer (importing anything under ``sift.render`` loads lxml and pypdf). See ``pool.py``.
"""

from sift.workers.pool import RenderPool

__all__ = ["RenderPool"]
