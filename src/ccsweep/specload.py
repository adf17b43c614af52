"""Reading sweep specs: YAML text, spec files and presets made into a `SweepSpec`, hardened.

A spec comes from anyone: a file on the command line, a preset, a Sweep resource's spec, a
manifest stored by an earlier release. This module is the one way in: it reads a file only if it
is a regular UTF-8 file of bounded size, parses YAML with a loader that refuses what hostile
files use (deep nesting, alias bombs, duplicate keys, YAML 1.1's surprising scalars), resolves
`include` and `defaults` into one flat list of experiments, and caps the cells a sweep may have.
What a valid spec is, it leaves to the model in `ccsweep.spec`, which it imports and which
imports nothing from here.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ccsweep.spec import PLAIN_NAME, Experiment, SpecError, SweepSpec, kind_in_words, one_line, short_repr

#: Limits that keep reading a spec fast and small whatever it holds; a real spec is far below each.
MAX_SPEC_BYTES = 1 << 20
MAX_YAML_DEPTH = 32
MAX_YAML_VALUES = 20_000
MAX_INCLUDED_FILES = 64
#: Cells a sweep may have unless $CCSWEEP_MAX_CELLS allows more: counted, never expanded, first.
DEFAULT_MAX_CELLS = 100_000


#: The presets shipped in the package (in a clone, a symlink to the repository's sweeps/), so an
#: installed ccsweep finds them from any folder.
PACKAGED_PRESETS = Path(__file__).resolve().parent / "presets"


def sweep_search_path() -> list[Path]:
    """Where preset names are looked up: $CCSWEEP_SWEEPS (colon-separated), ./sweeps, the packaged
    presets, and the cell image's /opt/ccsweep/sweeps."""
    dirs = [Path(p) for p in os.environ.get("CCSWEEP_SWEEPS", "").split(":") if p]
    return [*dirs, Path.cwd() / "sweeps", PACKAGED_PRESETS, Path("/opt/ccsweep/sweeps")]


def find_spec_file(ref: str) -> Path:
    """A path to a spec file, or a preset name such as `figure8`."""
    path = Path(ref)
    if path.suffix in (".yaml", ".yml") or os.sep in ref or path.is_dir():
        return path  # read_spec_text says what is wrong with it, if anything
    if re.fullmatch(PLAIN_NAME, ref):
        for directory in sweep_search_path():
            candidate = directory / f"{ref}.yaml"
            if candidate.is_file():
                return candidate
    raise SpecError(f"{ref}: not a spec file and not a preset (looked in {', '.join(map(str, sweep_search_path()))})")


def load_spec(ref: str) -> SweepSpec:
    """Load and validate a spec, resolving `include` and `defaults` into one flat experiment list."""
    return _checked(_load(find_spec_file(ref), _Reading(seen=())), str(ref))


def parse_spec(data: Any, origin: str = "spec", base_dir: Path | None = None) -> SweepSpec:
    """Validate an already-parsed spec (a YAML document or a Sweep resource's spec).

    Without `base_dir` (a Sweep resource), `include` names presets only: no file is read from
    wherever the caller happens to run.
    """
    return _checked(_resolve(data, origin, _Reading(seen=(), base_dir=base_dir)), origin)


def normalised_spec(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored (resolved) spec as today's model writes it, for comparing with a spec read today.

    Fields the model gained after the spec was stored take their defaults, so a sweep planned by an
    earlier release is the same sweep, not a "different spec", under today's code. A stored spec
    today's rules refuse is returned as it was: it then differs, and planning says so.
    """
    try:
        return parse_spec(stored, origin="stored spec").model_dump(mode="json")
    except SpecError:
        return stored


def max_cells() -> int:
    """The cell cap: $CCSWEEP_MAX_CELLS, else DEFAULT_MAX_CELLS."""
    text = os.environ.get("CCSWEEP_MAX_CELLS", "").strip()
    if not text:
        return DEFAULT_MAX_CELLS
    if not text.isdigit() or int(text) < 1:
        raise SpecError(f"CCSWEEP_MAX_CELLS: {text[:32]!r} is not a positive whole number")
    return int(text)


def _checked(spec: SweepSpec, origin: str) -> SweepSpec:
    """The spec if its cell count (from axis lengths: nothing is expanded) is within the cap."""
    limit, total = max_cells(), 0
    for exp in spec.experiments:
        total += exp.cell_count()
        if total > limit:
            raise SpecError(f"{origin}: experiments[{exp.name}]: the sweep reaches {total} cells here, more than "
                            f"the limit of {limit} (set CCSWEEP_MAX_CELLS to allow more)")
    return spec


@dataclass
class _Reading:
    """State of one load: the include chain (for cycles), files read so far, where includes live."""

    seen: tuple[Path, ...]
    base_dir: Path | None = None
    files: list[Path] | None = None

    def enter(self, path: Path) -> _Reading:
        files = self.files if self.files is not None else []
        if len(files) >= MAX_INCLUDED_FILES:
            raise SpecError(f"{path}: more than {MAX_INCLUDED_FILES} spec files through include")
        files.append(path)
        return _Reading(seen=self.seen + (path.resolve(),), base_dir=path.parent, files=files)


def _load(path: Path, reading: _Reading) -> SweepSpec:
    if path.resolve() in reading.seen:
        raise SpecError(f"{path}: include cycle through {' -> '.join(map(str, reading.seen))}")
    inner = reading.enter(path)
    text = read_spec_text(path)
    try:
        data = yaml.load(text, Loader=_SpecLoader)  # noqa: S506 - a SafeLoader with limits
    except _Refused as exc:
        raise SpecError(f"{path}: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        where = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark else ""
        raise SpecError(f"{path}: not valid YAML: {exc.problem or exc.context}{where}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    return _resolve(data, str(path), inner)


def read_spec_text(path: Path) -> str:
    """A spec file's text; anything but a regular UTF-8 file of at most MAX_SPEC_BYTES is refused."""
    data = read_regular_file(path, MAX_SPEC_BYTES, str(path))
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SpecError(f"{path}: UTF-16 text; save the spec as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte {exc.start}); save the spec as UTF-8") from None


def read_regular_file(path: Path, limit: int, label: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; errors start with `label`, never quote the file.

    Opened without blocking and checked on the open descriptor: a FIFO does not hang the reader,
    and /dev/zero or a folder is refused before a byte is read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SpecError(f"{label}: no such file") from None
    except OSError as exc:
        raise SpecError(f"{label}: cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SpecError(f"{label}: is a folder, not a regular file")
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(f"{label}: not a regular file (a FIFO, device or socket)")
        if info.st_size > limit:
            raise SpecError(f"{label}: larger than {limit >> 20} MiB")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SpecError(f"{label}: cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if size > limit:
        raise SpecError(f"{label}: larger than {limit >> 20} MiB")
    return b"".join(chunks)


class _Refused(Exception):
    """A YAML document the spec loader will not build (its message is one line, with the line number)."""


class _SpecLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing what no spec needs and what hostile files use.

    Nesting deeper than MAX_YAML_DEPTH (the composer recurses: a deep file ends in RecursionError),
    more than MAX_YAML_VALUES values counted with every alias expanded (a "billion laughs" file is
    small on disk and exponential once expanded), aliases of an unfinished anchor (cycles), keys
    that are not text, and duplicate keys (YAML would keep the last one silently).
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._size: dict[int, int] = {}
        self._height: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._size:
                raise _Refused(f"line {event.start_mark.line + 1}: an alias refers to the value that contains it")
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise _Refused(f"line {self._line()}: nested deeper than {MAX_YAML_DEPTH} levels")
        node = super().compose_node(parent, index)
        self._depth -= 1
        if node is None:
            return None
        if id(node) not in self._size:  # an alias returns its anchor's node, counted when it was composed
            children = self._children(node)
            self._size[id(node)] = 1 + sum(self._size[id(c)] for c in children)
            self._height[id(node)] = 1 + max((self._height[id(c)] for c in children), default=0)
        if self._size[id(node)] > MAX_YAML_VALUES:
            raise _Refused(f"line {node.start_mark.line + 1}: more than {MAX_YAML_VALUES} values with aliases "
                           "expanded; a spec is far smaller")
        if self._height[id(node)] > MAX_YAML_DEPTH:
            raise _Refused(f"line {node.start_mark.line + 1}: nested deeper than {MAX_YAML_DEPTH} levels "
                           "with aliases expanded")
        return node

    @staticmethod
    def _children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return []

    def _line(self) -> int:
        event = self.peek_event()
        return int(event.start_mark.line) + 1 if event and event.start_mark else 0

    def construct_document(self, node: yaml.Node) -> Any:
        _check_scalars(node, "", set())
        return super().construct_document(node)

    def construct_undefined(self, node: yaml.Node) -> Any:
        raise _Refused(f"line {node.start_mark.line + 1}: {node.tag.replace('tag:yaml.org,2002:', '!!')} values "
                       "have no place in a spec")

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges; its keys may be overridden, that is its purpose
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise _Refused(f"line {line}: key {short_repr(key)} is not a field name (field names are text)")
            if key in seen:
                raise _Refused(f"line {line}: duplicate key {short_repr(key)}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# Binary data, sets and ordered pairs are YAML types no spec field takes; refused by tag, not coerced.
for _tag in ("binary", "set", "omap", "pairs", "timestamp", "value"):
    _SpecLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _SpecLoader.construct_undefined)

_YAML_11 = "tag:ccsweep,yaml-1.1"
#: Plain scalars read as YAML 1.2's core schema, the JSON types the Sweep CRD has: true/false,
#: null, decimal integers (and 0o/0x), decimal floats with an optional exponent (1e3 included,
#: which YAML 1.1 reads as text), .inf/.nan (refused by the model). PyYAML reads YAML 1.1, where
#: `off`/`yes` are booleans, `1:30` is 90 (base 60), `010` is 8 and `1_000` is 1000: forms a
#: person did not mean as those numbers, so each is refused with its line instead of read.
_CORE_RESOLVERS: list[tuple[str, str, str]] = [
    ("tag:yaml.org,2002:merge", r"^(?:<<)$", "<"),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", "~nN"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?(?:0|[1-9][0-9]*)|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|(?:0|[1-9][0-9]*)(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
     r"|\.(?:nan|NaN|NAN))$",
     "-+0123456789."),
    # Last: only what none of the above took. YAML 1.1's booleans, base-60 numbers, leading-zero
    # (octal) and binary integers, numbers with `_`, and dates.
    (_YAML_11,
     r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF"
     r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"
     r"|[-+]?0[0-9_]+(?:\.[0-9_]*)?|[-+]?0b[01_]+|[-+]?[0-9][0-9]*_[0-9_]*(?:\.[0-9_]*)?"
     r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt ].*)?)$",
     "yYnNoO-+0123456789"),
]
#: Integers beyond this are no spec field's (the largest, a queue's bytes, is 10^10): refused
#: when read, so a 4,000-digit literal is one line, not a conversion traceback.
_MAX_INT_DIGITS = 19
_SpecLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in _CORE_RESOLVERS:
    _SpecLoader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _scalar_problem(node: yaml.ScalarNode) -> str | None:
    """Why a plain scalar cannot stand in a spec as YAML reads it, or None."""
    text = str(node.value)
    if node.tag == _YAML_11:
        return (f"{text[:24]!r} is read differently by YAML 1.1 and 1.2 (a yes/no/on/off boolean, a base-60 or "
                "leading-zero number, a date); write true/false or the plain number, or quote it for text")
    if node.tag == "tag:yaml.org,2002:int" and len(text.lstrip("+-")) > _MAX_INT_DIGITS:
        return f"{text[:12]}... ({len(text)} digits) is larger than any spec field takes"
    if node.tag == "tag:yaml.org,2002:float" and "." + text.lower().lstrip("+-.") not in (".inf", ".nan") \
            and abs(float(text)) == float("inf"):
        return f"{text[:24]} is larger than any spec field takes"
    return None


def _check_scalars(node: yaml.Node, path: str, seen: set[int]) -> None:
    """Refuse the first plain scalar _scalar_problem names, saying where it is (field path and line)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.ScalarNode):
        problem = _scalar_problem(node) if node.style is None else None
        if problem:
            raise _Refused(f"{path or 'document'}: {problem} (line {node.start_mark.line + 1})")
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_scalars(item, f"{path}[{i}]", seen)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _check_scalars(key, path, seen)
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
            _check_scalars(value, f"{path}.{name}" if path else name, seen)


def _construct_int(loader: _SpecLoader, node: yaml.ScalarNode) -> int:
    return int(str(loader.construct_scalar(node)), 0)


def _construct_float(loader: _SpecLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    return float(text.replace(".inf", "inf").replace(".nan", "nan"))


_SpecLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_SpecLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_SpecLoader.add_constructor(_YAML_11, _SpecLoader.construct_undefined)


def _resolve(data: Any, origin: str, reading: _Reading) -> SweepSpec:
    if not isinstance(data, dict):
        raise SpecError(f"{origin}: a spec is a mapping with name and experiments, not {kind_in_words(data)}")
    defaults = data.get("defaults")
    if defaults is not None and not isinstance(defaults, dict):
        raise SpecError(f"{origin}: defaults: a mapping of experiment fields, not {kind_in_words(defaults)}")
    raw = dict(data)
    experiments = data.get("experiments")
    if isinstance(experiments, list):
        raw["experiments"] = [{**(defaults or {}), **e} if isinstance(e, dict) else e for e in experiments]
    spec = _validate(raw, origin)
    included: list[Experiment] = []
    for i, ref in enumerate(spec.include):
        included.extend(_load(_include_path(ref, reading, f"{origin}: include[{i}]"), reading).experiments)
    if not included:
        return spec
    # Only the fields each experiment was given: a default filled in is not a setting, so a run-time
    # choice (SweepSpec.with_link) still applies to the fields the spec left open.
    return _validate({**spec.model_dump(exclude={"experiments", "include"}), "experiments": [
        e.model_dump(exclude_unset=True) for e in [*included, *spec.experiments]]}, origin)


def _include_path(ref: str, reading: _Reading, where: str) -> Path:
    """NAME.yaml is a file beside the including one; any other name is a preset."""
    if Path(ref).suffix not in (".yaml", ".yml"):
        return find_spec_file(ref)
    if reading.base_dir is None:
        raise SpecError(f"{where}: {ref}: a Sweep resource includes presets by name, not files")
    return reading.base_dir / ref


def _validate(raw: dict[str, Any], origin: str) -> SweepSpec:
    try:
        return SweepSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(f"{origin}: {one_line(exc, raw)}") from None
