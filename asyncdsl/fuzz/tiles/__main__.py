"""`python -m asyncdsl.fuzz.tiles --seed S --count N`: see asyncdsl/fuzz/tiles/cli.py."""

import sys

from .cli import main
from .generate import program_for

sys.exit(main(None, "python -m asyncdsl.fuzz.tiles", program_for))
