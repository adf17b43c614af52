"""Hostile specs, tried as a user would: each is refused with exit 2 and one line naming the field.

tests/hostile/<class>/ holds the corpus, one file per case; a file's first line says what its
error must contain (`# expect: ...`, in the file's own encoding). Cases that cannot be files in
a repository (a 50 MB spec, a FIFO, /dev/zero, a folder, a hostile --sweep) are built here. Every
case runs `ccsweep validate` in a process of its own limited to 300 MB of address space (forked
from a server that imported the CLI once: tests/unit/forkcli.py) and must finish
within 2 s of CPU time (the wall-clock limit is looser: the machine is shared), must not echo a
file it was pointed at, and a store passed to `ccsweep plan` stays exactly as it was. The specs
in tests/hostile/accepted/ and every preset must still validate.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from forkcli import ForkServer, Outcome

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "hostile"
NOT_CASES = {"accepted", "trace-files"}
MEMORY_BYTES = 300 << 20
CPU_SECONDS = 2.0
WALL_SECONDS = 20.0
#: What no error may contain: lines of files that hostile specs point at (/etc/passwd, the environment).
LEAKS = ("root:", "/bin/bash", "PATH=", os.uname().nodename)


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.relative_to(CORPUS).parts[0] not in NOT_CASES)


def expectation(path: Path) -> str:
    """The `# expect:` line of a case, read in whichever encoding the case is written."""
    data = path.read_bytes()
    for encoding in ("utf-8", "utf-16", "utf-32", "latin-1"):
        try:
            first = data.decode(encoding).lstrip("\ufeff").splitlines()[0]
        except (UnicodeDecodeError, IndexError):
            continue
        if first.startswith("# expect: "):
            return first.removeprefix("# expect: ")
    raise AssertionError(f"{path}: no '# expect: ' first line")


_SERVERS: list[ForkServer] = []
_NEXT = itertools.count()


@pytest.fixture(scope="module", autouse=True)
def fork_servers() -> Iterator[None]:
    """A few fork servers (tests/unit/forkcli.py): every run is a process of its own, without 0.4 s of imports."""
    _SERVERS.extend(ForkServer(MEMORY_BYTES, WALL_SECONDS) for _ in range((os.cpu_count() or 1) + 1))
    yield
    for server in _SERVERS:
        server.close()
    _SERVERS.clear()


def ccsweep(*args: str, env: dict[str, str], cwd: Path) -> Outcome:
    """Run the CLI like a user, in a process of its own within the memory limit; its CPU time is
    the child's own rusage, so runs in parallel threads do not count each other's time."""
    return _SERVERS[next(_NEXT) % len(_SERVERS)].run(list(args), env, cwd)


def assert_refused(outcome: Outcome, expected: str) -> None:
    lines = outcome.stderr.splitlines()
    assert outcome.returncode == 2, (outcome.args, outcome.returncode, outcome.stderr[-2000:])
    assert len(lines) == 1, lines[:5]
    assert lines[0].startswith("ccsweep: error: "), lines[0]
    assert expected in lines[0], lines[0]
    assert not any(leak in lines[0] for leak in LEAKS), lines[0]
    assert outcome.stdout == ""
    assert outcome.cpu_s < CPU_SECONDS, f"{outcome.cpu_s:.2f} s of CPU"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace folder the trace cases name: the committed bad traces plus what git cannot hold."""
    folder = tmp_path_factory.mktemp("traces")
    for trace in (CORPUS / "trace-files").iterdir():
        shutil.copy(trace, folder / trace.name)
    (folder / "folder.up").mkdir()
    os.mkfifo(folder / "fifo.up")
    (folder / "zero.up").symlink_to("/dev/zero")
    (folder / "passwd.up").symlink_to("/etc/passwd")
    with (folder / "huge.up").open("wb") as huge:
        huge.truncate(17 << 20)
    return folder


@pytest.fixture(scope="module")
def env(traces: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CCSWEEP_")}
    return {**clean, "CCSWEEP_TRACES": str(traces)}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with something in it (a planned sweep's files would do; any files show a change)."""
    root = tmp_path_factory.mktemp("box") / "box" / "store"  # escapes would land in the box, seen by snapshot()
    (root / "sweeps" / "escape").mkdir(parents=True)
    (root / "sweeps" / "escape" / "manifest.json").write_text('{"kept": true}\n')
    (root / "cells").mkdir()
    return root


def snapshot(root: Path) -> dict[str, tuple[str, float]]:
    """Every entry under `root` and two folders up (where `../../escape` would write): content hash and mtime."""
    entries = {}
    for path in sorted(root.parents[1].rglob("*")):
        if path.is_file() and not path.is_symlink():
            entries[str(path)] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime)
        else:
            entries[str(path)] = ("", path.lstat().st_mtime)
    return entries


CASES = corpus_files()


def test_the_corpus_is_large_and_in_classes():
    classes = {p.relative_to(CORPUS).parts[0] for p in CASES}
    assert len(CASES) + len(GENERATED) >= 100
    assert len(classes) >= 15, classes


def run_all(runs: dict[Path, list[str]], env: dict[str, str], cwd: Path) -> dict[Path, Outcome]:
    """Each run's outcome, a few processes at a time (each run is a process of its own)."""
    with ThreadPoolExecutor((os.cpu_count() or 1) + 1) as pool:
        outcomes = pool.map(lambda args: ccsweep(*args, env=env, cwd=cwd), runs.values())
        return dict(zip(runs, outcomes, strict=True))


@pytest.fixture(scope="module")
def validated(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Outcome]:
    """`ccsweep validate` of every corpus file."""
    return run_all({case: ["validate", str(case)] for case in CASES}, env, tmp_path_factory.mktemp("cwd"))


@pytest.mark.parametrize("case", CASES, ids=[str(p.relative_to(CORPUS)) for p in CASES])
def test_hostile_spec_is_refused_in_one_line(case: Path, validated: dict[Path, Outcome]):
    assert_refused(validated[case], expectation(case))


def _big_spec(tmp: Path) -> list[str]:
    path = tmp / "big.yaml"
    with path.open("w") as out:
        out.write("name: t\ndescription: >\n")
        line = "  " + "x" * 1022 + "\n"
        for _ in range(50 * 1024):
            out.write(line)
    return ["validate", str(path)]


def _fifo(tmp: Path) -> list[str]:
    os.mkfifo(tmp / "spec.yaml")
    return ["validate", str(tmp / "spec.yaml")]


def _link_to_dev_zero(tmp: Path) -> list[str]:
    (tmp / "zero.yaml").symlink_to("/dev/zero")
    return ["validate", str(tmp / "zero.yaml")]


def _unreadable_folder(tmp: Path) -> list[str]:
    (tmp / "sweep.yaml").mkdir()
    return ["validate", str(tmp / "sweep.yaml")]


#: Cases built at run time: (CLI arguments from a scratch folder, what the error must contain).
GENERATED = {
    "size/50-megabytes": (_big_spec, "larger than 1 MiB"),
    "paths/fifo": (_fifo, "not a regular file (a FIFO, device or socket)"),
    "paths/dev-zero": (lambda tmp: ["validate", "/dev/zero"], "/dev/zero: not a regular file"),
    "paths/dev-null": (lambda tmp: ["validate", "/dev/null"], "/dev/null: not a regular file"),
    "paths/link-to-dev-zero": (_link_to_dev_zero, "zero.yaml: not a regular file"),
    "paths/folder": (lambda tmp: ["validate", str(tmp)], "is a folder, not a regular file"),
    "paths/folder-named-yaml": (_unreadable_folder, "sweep.yaml: is a folder"),
    "paths/missing": (lambda tmp: ["validate", str(tmp / "missing.yaml")], "missing.yaml: no such file"),
    "paths/preset-with-dots": (lambda tmp: ["validate", "..figure8"], "not a spec file and not a preset"),
    "names/expand-sweep-upper": (lambda tmp: ["expand", "quick", "--sweep", "Quick"],
                                 "--sweep: 'Quick' is not a sweep name"),
    "names/validate-max-cells-env": (lambda tmp: ["validate", "quick"], "CCSWEEP_MAX_CELLS: 'lots'"),
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_hostile_path_or_option_is_refused_in_one_line(name: str, env: dict[str, str], tmp_path: Path):
    build, expected = GENERATED[name]
    args = build(tmp_path)
    if name.endswith("max-cells-env"):
        env = {**env, "CCSWEEP_MAX_CELLS": "lots"}
    assert_refused(ccsweep(*args, env=env, cwd=tmp_path), expected)


#: One case of each class, and the escaping sweep name, run through `plan` with a store.
PLAN_CASES = sorted({p.relative_to(CORPUS).parts[0]: p for p in reversed(CASES)}.values())


@pytest.fixture(scope="module")
def planned(env: dict[str, str], store: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Outcome]:
    """`ccsweep plan --store` of one case per class; the store must be the same before and after all of them."""
    before = snapshot(store)
    outcomes = run_all({case: ["plan", str(case), "--store", str(store)] for case in PLAN_CASES}, env,
                       tmp_path_factory.mktemp("cwd"))
    assert snapshot(store) == before
    return outcomes


@pytest.mark.parametrize("case", PLAN_CASES, ids=[str(p.relative_to(CORPUS)) for p in PLAN_CASES])
def test_plan_of_a_hostile_spec_leaves_the_store_untouched(case: Path, planned: dict[Path, Outcome]):
    assert_refused(planned[case], expectation(case))


@pytest.mark.parametrize("name", ["../../escape", "../escape", "/tmp/escape", "escape/..", "Escape", "-rf"])
def test_plan_refuses_a_sweep_name_that_is_not_a_slug(name: str, env: dict[str, str], store: Path, tmp_path: Path):
    before = snapshot(store)
    assert_refused(ccsweep("plan", "quick", "--sweep", name, "--store", str(store), env=env, cwd=tmp_path),
                   "--sweep: ")
    assert snapshot(store) == before


ACCEPTED = sorted((CORPUS / "accepted").glob("*.yaml"))
PRESETS = sorted((REPO / "sweeps").glob("*.yaml"))


@pytest.fixture(scope="module")
def accepted(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Outcome]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CCSWEEP_")}
    return run_all({spec: ["validate", str(spec)] for spec in PRESETS + ACCEPTED}, clean,
                   tmp_path_factory.mktemp("cwd"))


@pytest.mark.parametrize("spec", PRESETS + ACCEPTED, ids=[p.stem for p in PRESETS + ACCEPTED])
def test_valid_specs_are_still_accepted(spec: Path, accepted: dict[Path, Outcome]):
    """Presets and edge-valid specs validate, with CCSWEEP_TRACES unset (the packaged traces serve)."""
    done = accepted[spec]
    assert done.returncode == 0, done.stderr
    assert re.search(r": \d+ cells, valid$", done.stdout.strip())
    assert done.cpu_s < CPU_SECONDS * 2


def test_packaged_traces_match_their_readme():
    """The README's table is the provenance record: each shipped trace has the hash it states."""
    folder = REPO / "src" / "ccsweep" / "traces"
    table = dict(re.findall(r"^\| `([^`]+)` \| \d+ \| `([0-9a-f]{64})` \|$", (folder / "README.md").read_text(), re.M))
    shipped = {p.name for p in folder.iterdir() if p.name != "README.md"}
    assert set(table) == shipped
    for name, digest in table.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name


def test_the_cell_cap_counts_without_expanding_and_can_be_raised(monkeypatch: pytest.MonkeyPatch):
    from ccsweep.spec import SpecError
    from ccsweep.specload import parse_spec

    bomb = {"name": "t", "experiments": [{
        "name": "e", "cc": ["bbr", "cubic"], "loss": [i / 1000 for i in range(1000)], "rtt_ms": list(range(1000)),
        "bandwidth_mbps": list(range(1, 151)), "duration_s": 5}]}
    start = time.process_time()
    with pytest.raises(SpecError, match="reaches 300000000 cells here, more than the limit of 100000"):
        parse_spec(bomb)
    assert time.process_time() - start < 1.0
    monkeypatch.setenv("CCSWEEP_MAX_CELLS", "300000000")
    assert parse_spec(bomb).experiments[0].cell_count() == 300_000_000


@pytest.mark.parametrize("content, error", [
    (b"", "empty"),
    (b"0\n0\n", "period 0"),
    (b"1\n3\n2\n", "line 3 goes back in time"),
    (b"1\nroot:x:0:0:secret\n", "line 2 is not an integer"),
    (b"5\n\n6\n", "line 2 is not an integer"),
    (b"12345678901\n", "line 1 is not an integer"),
])
def test_trace_content_errors_name_the_line_never_the_content(content: bytes, error: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch):
    from ccsweep.expand import load_trace
    from ccsweep.spec import SpecError

    (tmp_path / "t.up").write_bytes(content)
    monkeypatch.setenv("CCSWEEP_TRACES", str(tmp_path))
    with pytest.raises(SpecError) as info:
        load_trace("t.up")
    assert error in str(info.value)
    assert "secret" not in str(info.value) and "root" not in str(info.value)


@pytest.mark.parametrize("name", ["/etc/passwd", "../traces/Verizon-LTE-short.up", ".hidden", "a/b", ""])
def test_trace_lookup_takes_plain_names_only(name: str):
    from ccsweep.expand import find_trace
    from ccsweep.spec import SpecError

    with pytest.raises(SpecError, match="not a trace name"):
        find_trace(name)


def test_extra_trace_folders_come_first_and_packaged_traces_need_no_setting(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    from ccsweep.expand import PACKAGED_TRACES, find_trace, load_trace

    monkeypatch.delenv("CCSWEEP_TRACES", raising=False)
    assert find_trace("Verizon-LTE-short.up") == PACKAGED_TRACES / "Verizon-LTE-short.up"
    assert 5.5 < load_trace("Verizon-LTE-short.up").mean_mbps < 6.5  # Mahimahi's Verizon LTE uplink, ~6 Mbit/s
    (tmp_path / "Verizon-LTE-short.up").write_text("1\n")
    monkeypatch.setenv("CCSWEEP_TRACES", str(tmp_path))
    assert find_trace("Verizon-LTE-short.up") == tmp_path / "Verizon-LTE-short.up"
