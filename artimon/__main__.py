import sys

from artimon.cli import main

sys.exit(main())
