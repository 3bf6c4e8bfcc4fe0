"""``python -m cua_rl.cli``: the same as the ``cua-rl`` console script."""

import sys

from cua_rl.cli import main

if __name__ == "__main__":
    sys.exit(main())
