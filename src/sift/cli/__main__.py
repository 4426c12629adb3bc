"""``python -m sift.cli``: the ``sift`` command (tests and benchmarks start servers so)."""

import sys

from sift.cli import main

sys.exit(main())
