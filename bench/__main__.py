"""`python -m bench PART [options]`: run one benchmark part (`python -m bench --help` lists them)."""

import sys

from bench.parts import main

if __name__ == "__main__":  # not again in a spawned child (the simulation pool's)
    sys.exit(main())
