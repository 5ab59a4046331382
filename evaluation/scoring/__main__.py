"""``python -m evaluation.scoring``: the official evaluator's command line (see ``cli``)."""
import sys

from .cli import main

sys.exit(main())
