"""``python -m benchmarks [--quick] [--out DIR] [--cases IDS] [--no-heyoka]``: the B0-B7 comparisons of
:mod:`benchmarks.bench` (table, ``bench.json``, ``bench.txt``, ``bench.png``)."""

from benchmarks.bench import main

raise SystemExit(main())
