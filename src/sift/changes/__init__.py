"""Change tracking (``changes: true``): what changed in a page since this caller last looked.

- ``diff``: a bounded unified diff of two texts, by lines (difflib), with added/removed
  counts and a ``truncated`` flag;
- ``track``: the policy — what a fetch compares (the rendered markdown, ``ignore``
  selectors excluded), the ``change`` object's status, what a snapshot records, and the
  cache rule (never compare a cached copy older than the last snapshot).

The history itself lives in the store (``sift.store.history``); the service calls this room
(``service/changes.py``). Nothing here does I/O.
"""
