"""``python -m geogp.cli``: the ``geogp`` command."""

import sys

from geogp.cli import main

sys.exit(main())
