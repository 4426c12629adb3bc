"""The work every render worker would repeat at its start, done once in the fork server.

``multiprocessing``'s fork server imports the modules it is told to preload and nothing
else (``workers.process.PRELOAD``); this module is the one that does work. Importing it
imports the renderer, loads the extraction model (it reads the model file) and renders one
constant page, so a worker forked from the fork server starts warm. Nothing in sift imports
it: importing it does that work, which is its only purpose.

A failure here is not fatal: each worker runs the same self-test again after its fork,
under its memory limit, and reports what fails (the pool then names it as broken).
"""

from __future__ import annotations

import contextlib

from sift.workers.process import selftest

with contextlib.suppress(Exception):
    selftest()
