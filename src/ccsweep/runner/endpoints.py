"""The flow endpoints' arguments: the same cell flows on every link, placed by the link.

`-m ccsweep.runner.flow receiver|sender` with the cell's flows, port and duration; a link puts the
interpreter in a namespace (or, for Mahimahi, runs the sender inside its shells) and adds where
each endpoint binds and connects through `options`.
"""

from __future__ import annotations

from ccsweep.cell import Cell

RECEIVER_PORT = 5201


def receiver_args(cell: Cell, *options: str) -> list[str]:
    """An interpreter's arguments for the receiver of the cell's flows."""
    return ["-m", "ccsweep.runner.flow", "receiver", *options, "--port", str(RECEIVER_PORT),
            "--flows", str(len(cell.params.flows)), "--duration", f"{cell.params.duration_s:g}"]


def sender_args(cell: Cell, *options: str) -> list[str]:
    """An interpreter's arguments for the sender of the cell's flows."""
    flows = [f"--flow={i}:{f.cc}:{f.start_s:g}" for i, f in enumerate(cell.params.flows)]
    return ["-m", "ccsweep.runner.flow", "sender", *options, "--port", str(RECEIVER_PORT),
            "--duration", f"{cell.params.duration_s:g}", "--message-bytes", str(cell.params.message_bytes), *flows]
