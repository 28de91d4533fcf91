"""``python -m nbrefine.cli``: the same as the ``nbrefine`` console script.

May import: :mod:`.main`.
"""

import sys

from .main import main

sys.exit(main())
