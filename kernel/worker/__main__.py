"""``python -m hotswitch.kernel.worker BODY``: what torchrun starts on every rank."""

import sys

from hotswitch.kernel.worker.entry import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
