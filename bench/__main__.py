"""`python -m bench PART [options]`: run one benchmark part (`python -m bench --help` lists them)."""

import sys

from bench.parts import main

sys.exit(main())
