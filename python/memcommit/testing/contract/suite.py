"""Every contract test class and the fixtures they need, for ``from ... import *``.

Importing this module into a test module makes that module run the whole suite against its
``memcommit_backend`` fixture (define your own after the import to test your store).
"""

from __future__ import annotations

from . import classes
from .classes import *  # noqa: F403  (the test classes classes.__all__ lists)
from .plugin import harness, memcommit_backend

__all__ = ["harness", "memcommit_backend"]
__all__ += classes.__all__
__all__.remove("CONTRACT_CLASSES")  # the tuple is for the plugin, not for a test module
del classes, CONTRACT_CLASSES  # noqa: F821  (only __all__ is this module's surface)
