"""``python -m explorer.cli ...``: the ``explorer`` command without the console script."""
import sys

from . import main

sys.exit(main())
