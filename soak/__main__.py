"""``python -m soak``: the soak run (``soak/run.py``)."""

import sys

from soak.run import main

sys.exit(main())
