"""``python -m flowlib``: the command line."""

from flowlib.cli import main

raise SystemExit(main())
