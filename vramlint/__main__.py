"""Allow ``python -m vramlint``."""

import sys

from vramlint.cli import main

sys.exit(main())
