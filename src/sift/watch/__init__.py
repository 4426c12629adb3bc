"""Watches: URLs sift checks on a schedule for a caller, through the normal pipeline.

- ``spec``: a creation body, validated (interval, options, ignore, webhook);
- ``watches``: ``Watches``, the operations the front ends call;
- ``scheduler``: ``Scheduler``, one per node: claims due checks and runs them;
- ``check``: one check (a fresh ``Service.fetch``) and its event;
- ``views``: a watch and its events as callers see them;
- ``notify``: the hand-over of a change to the webhook outbox.

The rows live in the store (``sift.store.watches``, both backends). See docs/watches.md.
"""
