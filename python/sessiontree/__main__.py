"""``python -m sessiontree``: the command-line interface (see :mod:`sessiontree.cli`)."""

import sys

from .cli import main

sys.exit(main())
