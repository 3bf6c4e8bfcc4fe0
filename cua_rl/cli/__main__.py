"""``python -m cua_rl.cli``: the same as the ``cua-rl`` console script."""

import sys

from cua_rl.cli import main

sys.exit(main())
