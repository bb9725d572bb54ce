"""`python -m parasim.bench <name> [...]`."""

import sys

from parasim.bench import main

sys.exit(main())
