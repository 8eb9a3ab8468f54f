"""``python -m bookkeeper.testing``: a test application (see :mod:`bookkeeper.testing.apps`)."""

import sys

from bookkeeper.testing.apps import main

sys.exit(main())
