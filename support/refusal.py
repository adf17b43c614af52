"""How a test reads ccsweep's refusal of a spec: `ccsweep validate` on it exits 2 with one line."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from ccsweep.cli import main


def validate_refusal(folder: Path, spec: dict) -> str:
    """The one line `ccsweep validate` refuses `spec` with (written to `folder`/spec.yaml), having
    checked that it exits 2 and says nothing else."""
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = CliRunner().invoke(main, ["validate", str(path)])
    assert done.exit_code == 2, done.output
    lines = done.output.strip().splitlines()
    assert len(lines) == 1, done.output
    return lines[0]
