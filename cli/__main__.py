"""``python -m soadyn.cli``: the soadyn command."""

import sys

from soadyn.cli.main import main

sys.exit(main())
