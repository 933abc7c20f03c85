"""The interop suite: every test collected under this folder is marked ``interop``.

(``pytest -m "not interop"`` leaves out the real servers.) The helpers are in ``support.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.interop)
