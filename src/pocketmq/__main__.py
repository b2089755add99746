"""``python -m pocketmq``: the ``pocketmq`` command, for an environment whose scripts are not on PATH."""

import sys

from pocketmq.cli.main import main

sys.exit(main())
