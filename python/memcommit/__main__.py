"""Run the command line as ``python -m memcommit``."""

import sys

from memcommit.cli import main

if __name__ == "__main__":
    sys.exit(main())
