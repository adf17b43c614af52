"""The cell runner: one cell in two network namespaces joined by its link (ccsweep-link or Mahimahi).

`run_cell` is imported lazily: the flow endpoints (`python -m ccsweep.runner.flow`) live in this
package and must start quickly inside a namespace, without pydantic and the result schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ccsweep.runner.api import CellObserver, CellOutput, CellUnavailable, CongestionControlUnavailable
    from ccsweep.runner.run import run_cell

__all__ = ["CellObserver", "CellOutput", "CellUnavailable", "CongestionControlUnavailable", "run_cell"]


def __getattr__(name: str) -> Any:
    if name == "run_cell":
        from ccsweep.runner.run import run_cell

        return run_cell
    if name in ("CellObserver", "CellOutput", "CellUnavailable", "CongestionControlUnavailable"):
        from ccsweep.runner import api

        return getattr(api, name)
    raise AttributeError(name)
