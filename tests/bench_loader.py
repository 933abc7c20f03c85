"""Load the checkout's ``bench`` folder as the package ``bench``, for the tests of the bench.

``bench`` is not installed (it lives beside the packages, for ``python -m bench`` from the
checkout), so it is loaded from its folder under its own name, without putting the checkout on
``sys.path`` (which would expose the bare ``protocol``/``actors`` folders).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

#: The checkout: the folder that holds ``bench/``.
ROOT = Path(__file__).resolve().parent.parent


def load_bench() -> None:
    """Make ``import bench`` (and its submodules) import the checkout's ``bench/``."""
    if "bench" in sys.modules:
        return
    folder = ROOT / "bench"
    spec = importlib.util.spec_from_file_location(
        "bench", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = module
    spec.loader.exec_module(module)
