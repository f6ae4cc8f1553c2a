"""`python -m asyncdsl.fuzz.wgmma --seed S --count N`: the tile fuzzer's command line
(asyncdsl/fuzz/tiles/cli.py) over wgmma configurations."""

import sys

from asyncdsl.fuzz.tiles.cli import main

from .generate import program_for

sys.exit(main(None, "python -m asyncdsl.fuzz.wgmma", program_for))
