"""``python -m hotswitch.kernel.cli ...``: the ``hotswitch`` command."""

import sys

from hotswitch.kernel.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
