"""Collection rules for the whole checkout: ``flowlib/torch.py`` (the optional PyTorch bridge) imports torch at the
top, so the doctest run of the package skips it where torch is not installed."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("torch") else ["flowlib/torch.py"]
