"""``python -m torch_diode`` is the ``diode`` command."""

import sys

from torch_diode.cli import main

if __name__ == "__main__":
    sys.exit(main())
