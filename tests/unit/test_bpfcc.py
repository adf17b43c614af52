"""BPF congestion controls as algorithms like any other: named by specs, pinned in cell ids by
their object's digest (only theirs), refused in one line where the kernel lacks what they need.

No root and no kernel registration here (tests/executor/test_bpf_registration.py does that);
the objects are real files, written into a temporary folder named by $CCSWEEP_BPF_DIR.
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from ccsweep import bpfregister
from ccsweep.bpfcc import OBJECTS_ENV, PROGRAMS, BpfCongestionControl, not_measured
from ccsweep.cell import canonical_json
from ccsweep.expand import expand
from ccsweep.spec import KNOWN_CONGESTION_CONTROLS, SpecError, SweepSpec

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "bpf" / "cc"


def spec(*ccs: str) -> SweepSpec:
    return SweepSpec.model_validate({"name": "bpf", "experiments": [{
        "name": "e", "cc": list(ccs), "loss_percent": [1], "rtt_ms": [20], "bandwidth_mbps": [10], "duration_s": 3}]})


@pytest.fixture
def objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of objects, one file per shipped program, as `make bpf` leaves them."""
    for name in PROGRAMS:
        (tmp_path / f"{name}.bpf.o").write_bytes(f"object of {name}".encode())
    monkeypatch.setenv(OBJECTS_ENV, str(tmp_path))
    return tmp_path


def test_every_shipped_program_is_a_known_algorithm_with_gpl_source_named_as_its_map():
    assert sorted(PROGRAMS) == sorted(get_args(BpfCongestionControl))
    assert set(PROGRAMS) <= set(KNOWN_CONGESTION_CONTROLS)
    assert "GPL-2.0" in (SOURCES / "LICENSE").read_text()
    for name in PROGRAMS:
        source = (SOURCES / f"{name}.bpf.c").read_text()
        assert source.startswith("// SPDX-License-Identifier: GPL-2.0\n"), name
        assert re.search(rf'(\.name = "{name}"|CCSWEEP_BBR\({name}, [01]\))', source), f"{name}: its map's name"
        assert len(name) < 16  # TCP_CA_NAME_MAX, the terminating NUL included


def test_a_bpf_cell_is_pinned_to_its_objects_digest_and_a_changed_object_is_a_new_cell(objects: Path):
    cells = {c.params.flows[0].cc: c for c in expand(spec("bbr", "bbr_unpaced", "bbr_bpf"))}
    digest = hashlib.sha256(b"object of bbr_unpaced").hexdigest()
    assert [(p.name, p.sha256) for p in cells["bbr_unpaced"].params.bpf_programs] == [("bbr_unpaced", digest)]
    assert cells["bbr"].params.bpf_programs == ()
    assert cells["bbr_unpaced"].id != cells["bbr_bpf"].id

    (objects / "bbr_unpaced.bpf.o").write_bytes(b"the program changed")
    again = {c.params.flows[0].cc: c for c in expand(spec("bbr", "bbr_unpaced", "bbr_bpf"))}
    assert again["bbr_unpaced"].id != cells["bbr_unpaced"].id
    assert again["bbr"].id == cells["bbr"].id and again["bbr_bpf"].id == cells["bbr_bpf"].id


def test_a_kernel_algorithms_cell_hashes_no_bpf_programs_so_it_keeps_its_id(objects: Path):
    (cell,) = expand(spec("cubic"))
    assert "bpf" not in canonical_json(cell.params)
    (bpf_cell,) = expand(spec("aimd_bpf"))
    assert '"bpf_programs":[{"name":"aimd_bpf"' in canonical_json(bpf_cell.params)


def test_planning_without_the_object_is_one_line_naming_the_field_and_how_to_build_it(tmp_path: Path,
                                                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(OBJECTS_ENV, str(tmp_path / "none"))
    with pytest.raises(SpecError) as refused:
        expand(spec("bbr_unpaced"))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("experiments[e].cc: BPF congestion control bbr_unpaced") and "make bpf" in message


def test_validate_refuses_an_unknown_algorithm_naming_the_shipped_ones(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nexperiments:\n- {name: e, cc: [bbr_unpacd], loss_percent: [1], rtt_ms: [20],"
                    " bandwidth_mbps: [10], duration_s: 3}\n")
    done = subprocess.run([sys.executable, "-m", "ccsweep", "validate", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "bbr_unpaced" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_records_of_bbr_through_bpf_say_bbrs_estimates_are_not_measured():
    assert not_measured(["bbr_unpaced"]) == ["bbr_info"] == not_measured(["cubic", "bbr_bpf"])
    assert not_measured(["bbr"]) == [] == not_measured(["aimd_bpf"])


#: Lines of `bpftool btf dump file /sys/kernel/btf/vmlinux` on this project's 6.18 machine.
DUMP = """[14441] STRUCT 'tcp_congestion_ops' size=192 vlen=18
[43265] STRUCT 'bpf_struct_ops_tcp_congestion_ops' size=256 vlen=2
[62080] FUNC 'bbr_init' type_id=46430 linkage=static
[62081] DECL_TAG 'bpf_kfunc' type_id=62080 component_idx=-1
[62085] FUNC 'bbr_main' type_id=62084 linkage=static
[62086] DECL_TAG 'bpf_kfunc' type_id=62085 component_idx=-1
"""


def test_a_kernel_lacking_struct_ops_or_a_kfunc_is_named_in_one_line():
    lines = DUMP.splitlines()
    everything = "\n".join(lines + [f"[{70000 + i}] FUNC '{k}' type_id=1 linkage=static\n"
                                    f"[{80000 + i}] DECL_TAG 'bpf_kfunc' type_id={70000 + i} component_idx=-1"
                                    for i, k in enumerate(PROGRAMS["bbr_unpaced"].kfuncs[2:])])
    assert bpfregister.missing_in_btf(everything, ["bbr_unpaced", "aimd_bpf"]) is None
    assert bpfregister.missing_in_btf(DUMP, ["aimd_bpf"]) is None
    assert bpfregister.missing_in_btf(DUMP, ["bbr_unpaced"]) == (
        "this kernel does not export bbr_sndbuf_expand as a kfunc, which bbr_unpaced calls")
    untagged = everything.replace("DECL_TAG 'bpf_kfunc' type_id=62085", "DECL_TAG 'other' type_id=62085")
    assert "bbr_main as a kfunc" in (bpfregister.missing_in_btf(untagged, ["bbr_bpf"]) or "")
    no_struct_ops = "\n".join(line for line in lines if "bpf_struct_ops_" not in line)
    assert "no BPF struct_ops for tcp_congestion_ops" in (bpfregister.missing_in_btf(no_struct_ops, ["aimd_bpf"]) or "")


def test_a_kernel_without_btf_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    # A fake: this machine's kernel has BTF, and a kernel without it cannot be booted for a test.
    monkeypatch.setattr(bpfregister, "BTF_VMLINUX", tmp_path / "vmlinux")
    assert bpfregister.missing_support(["bbr_unpaced"]) == (
        f"this kernel has no BTF ({tmp_path / 'vmlinux'}): it cannot load BPF congestion controls")


def test_recovery_drops_a_dead_runs_entry_and_touches_nothing_the_kernel_does_not_list(tmp_path: Path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    state = tmp_path / "state.json"
    entry = bpfregister.Registration(name="bbr_unpaced", sha256="0" * 64, pid=dead.pid, pid_start=1)
    state.write_text(bpfregister.RegistrationState(registrations=[entry]).model_dump_json())
    assert "bbr_unpaced" not in bpfregister.kernel_registered()  # so recovery has nothing to unregister
    assert bpfregister.recover(state) == ["bbr_unpaced"]
    assert bpfregister.RegistrationState.model_validate_json(state.read_text()).registrations == []
    assert bpfregister.recover(tmp_path / "absent.json") == [] and not (tmp_path / "absent.json").exists()


def test_a_damaged_state_file_is_refused_in_one_line_not_overwritten(tmp_path: Path):
    state = tmp_path / "state.json"
    state.write_text("{not json")
    with pytest.raises(bpfregister.BpfUnavailable) as refused:
        bpfregister.recover(state)
    assert "not a ccsweep BPF registration state" in str(refused.value) and "\n" not in str(refused.value)
    assert state.read_text() == "{not json"


def test_waiting_for_another_process_at_the_state_file_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    state = tmp_path / "state.json"
    state.write_text(bpfregister.RegistrationState().model_dump_json())
    monkeypatch.setattr(bpfregister, "LOCK_TIMEOUT_S", 0.3)
    with open(tmp_path / "state.json.lock", "w") as held:  # another open file: as another process holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(bpfregister.BpfUnavailable, match="held its lock for 0.3 s"):
            bpfregister.recover(state)
