"""`python -m asyncdsl` is the `asyncdsl` command."""

import sys

from asyncdsl.cli import main

sys.exit(main())
