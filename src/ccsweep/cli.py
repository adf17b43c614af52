"""The `ccsweep` command line: validate, expand, plan, cell, run, status, figures, compare, export, presets.

Errors a user can fix (a bad spec, a missing algorithm, an unknown store) print one line on
stderr and exit 2; nothing stored is touched when the input is bad.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from pydantic import ValidationError
from rich.console import Console

from ccsweep.buildinfo import build_identity
from ccsweep.cell import Cell, LinkBackend
from ccsweep.exitcodes import EXIT_INTERRUPTED, EXIT_RETRY, EXIT_UNAVAILABLE, EXIT_USAGE
from ccsweep.linkdesc import link_names
from ccsweep.plan import CHUNK_SIZE
from ccsweep.podrequests import CellSizing
from ccsweep.podspec import CPU_BOUNDS, MEMORY_BOUNDS
from ccsweep.result import RERUN_STATUSES
from ccsweep.spec import SpecError, SweepSpec, check_sweep_name, one_line
from ccsweep.specload import load_spec, sweep_search_path
from ccsweep.store import DEFAULT_STORE, ResultStore, StoreError, StoreUnavailable, attempt_folders_text, open_store
from ccsweep.storedplan import get_manifest
from ccsweep.storeurls import NAMESPACE_ENV, NamespaceError, check_namespace, namespace_store

if TYPE_CHECKING:
    from ccsweep.cellrun import CellOutcome
    from ccsweep.plan import Survey


def fail(message: str | Exception, code: int | None = None) -> NoReturn:
    """One line on stderr, then exit: 2 for input the user can fix, 75 for a store to try again."""
    if code is None:
        code = EXIT_RETRY if isinstance(message, StoreUnavailable) else EXIT_USAGE
    click.echo(f"ccsweep: error: {message}", err=True)
    sys.exit(code)


def _sweep(name: str) -> str:
    """A --sweep naming a stored sweep: a slug (never a path out of the store), or a one-line exit 2."""
    try:
        return check_sweep_name(name)
    except SpecError as exc:
        fail(exc)


def _load(spec_ref: str, sweep_name: str | None, time_scale: float | None = None,
          link: LinkBackend | None = None) -> SweepSpec:
    """The spec, renamed by --sweep, put on another link by --link and shortened by --time-scale.

    A sweep on another link, or time-scaled, is another sweep: without --sweep it is named
    `<name>-<link>` (when --link changed any experiment's link) and `<name>-x<scale>`, so its plan
    never meets the spec's own under one name and both sets of results share one store.
    """
    try:
        if sweep_name is not None:
            check_sweep_name(sweep_name)
        spec = load_spec(spec_ref)
    except SpecError as exc:
        fail(exc)
    suffix = ""
    relinked = spec.with_link(link) if link is not None else spec
    if [e.link for e in relinked.experiments] != [e.link for e in spec.experiments]:
        spec, suffix = relinked, f"-{link}"
    if time_scale is not None and time_scale != spec.time_scale:
        spec = spec.model_copy(update={"time_scale": time_scale})
        suffix += f"-x{time_scale:g}".replace(".", "-")
    # The spec's name is shortened, never the suffix: a 63-character name, scaled, must not come
    # out as the unscaled sweep's name.
    name = sweep_name or (spec.name[:63 - len(suffix)].rstrip("-") + suffix)
    return spec.model_copy(update={"name": name}) if name != spec.name else spec


def optional_number(low: float, high: float) -> Callable[[click.Context, click.Parameter, str | None], float | None]:
    """A click callback for a number from `low` to `high` that may be left empty: an Argo template
    passes every parameter, an unset one as "" (then None: the command's own default applies)."""

    def check(_ctx: click.Context, _param: click.Parameter, value: str | None) -> float | None:
        if value is None or value == "":
            return None
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not low <= number <= high:  # also refuses nan and inf
            raise click.BadParameter(f"{value[:32]!r}: give a number from {low:,.12g} to {high:,.12g}, or nothing")
        return number

    return check


#: --time-scale: empty means the spec's own time_scale (the Argo template's default), so one value
#: decides a sweep's scale: the spec's, unless a scale is given.
time_scale_option = click.option(
    "--time-scale", callback=optional_number(0.001, 1), metavar="FACTOR",
    help="Shorten every flow by FACTOR (e.g. 0.05) for a quick pass: scaled cells are other cells, recorded as "
         "scaled, and the sweep is named NAME-xFACTOR unless --sweep says otherwise. Empty or unset: the "
         "spec's own time_scale.")


link_option = click.option(
    "--link", type=click.Choice(link_names()),
    help="The link emulator of every experiment that does not set its own `link`: each cell records it (a cell "
         "on another link is another cell), and a sweep this moves to another link is named NAME-LINK unless "
         "--sweep says otherwise.")


revise_option = click.option(
    "--revise", is_flag=True,
    help="The spec of an already planned sweep changed on purpose: keep the old plan as a revision and plan "
         "the new one (stored cells are reused, only new ones run).")


def _true_or_false(_ctx: click.Context, param: click.Parameter, value: str) -> bool:
    """A boolean given as text (an Argo parameter's value, one argv item): exactly true or false."""
    if value not in ("true", "false"):
        fail(f"--{str(param.name).replace('_', '-')} {value[:32]!r}: give true or false")
    return value == "true"


def _allowed_endpoint(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--store and --pushgateway in a pod of the chart's: only what the chart's values list
    ($CCSWEEP_ALLOWED_STORES, $CCSWEEP_ALLOWED_PUSHGATEWAYS), whatever a Workflow's parameters say.
    In a pod that knows its namespace ($CCSWEEP_NAMESPACE, from the downward API), the store is
    that namespace's folder of --store (storeurls.namespace_store), as the operator plans in it."""
    from ccsweep.podspec import ALLOWED_PUSHGATEWAYS_ENV, ALLOWED_STORES_ENV, PodValueError, check_endpoint

    if not value:
        return value
    is_store = param.name == "store_url"
    variable = ALLOWED_STORES_ENV if is_store else ALLOWED_PUSHGATEWAYS_ENV
    try:
        url = check_endpoint(f"--{str(param.name).removesuffix('_url')}", value, variable, os.environ)
        namespace = _pod_namespace()
        return namespace_store(url, namespace) if is_store and namespace is not None else url
    except PodValueError as exc:
        fail(exc)


def _pod_namespace() -> str | None:
    """The namespace this process runs in, as its pod's downward API gives it ($CCSWEEP_NAMESPACE,
    checked), or None outside a pod of ccsweep's templates: never a parameter's value."""
    namespace = os.environ.get(NAMESPACE_ENV)
    if namespace is None:
        return None
    try:
        return check_namespace(namespace)
    except NamespaceError as exc:
        fail(exc)


store_option = click.option("--store", "store_url", default=DEFAULT_STORE, show_default=True,
                            envvar="CCSWEEP_STORE", show_envvar=True, callback=_allowed_endpoint,
                            help="Where results go: a folder, file://PATH or s3://BUCKET/PREFIX "
                                 "(S3 endpoint and keys from CCSWEEP_S3_* / AWS_* environment variables); "
                                 "only a store $CCSWEEP_ALLOWED_STORES lists, where set.")



def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--version: the build identity, computed only when asked (it may run git in a clone)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"ccsweep {build_identity()}")
        ctx.exit()


#: --lateness-threshold-us, for `ccsweep cell`, every cell of `ccsweep run`, and a workflow's plan.
lateness_threshold_option = click.option(
    "--lateness-threshold-us", callback=optional_number(1, 1_000_000), metavar="US",
    help="Flag a result late when the emulator's p99 lateness exceeds this (1 to 1,000,000 us; empty: unset), "
         "in place of the cell's own threshold (1% of its RTT, between 400 and 1000 us; docs/emulator.md). Each "
         "result records the threshold it was judged by. For a host whose hypervisor steals CPU, at the cost of "
         "counting results whose link ran that late.")


def pushgateway_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--pushgateway, also read from $CCSWEEP_PUSHGATEWAY (a cluster or shell sets it once)."""
    return click.option("--pushgateway", envvar="CCSWEEP_PUSHGATEWAY", show_envvar=True, callback=_allowed_endpoint,
                        help=f"{help_text} With $CCSWEEP_ALLOWED_PUSHGATEWAYS set (the chart's pods), one it lists.")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and the commit it was built from, and exit.")
def main() -> None:
    """Batch TCP congestion-control experiments over an emulated link.

    A sweep spec (YAML, or a preset name such as figure8) expands into cells; each cell runs the
    kernel's TCP over ccsweep-link in network namespaces of its own and stores one result record.
    """


@main.command()
@click.argument("spec")
@click.option("--sweep", "sweep_name", help="Store under this sweep name instead of the spec's.")
@click.option("--format", "fmt", type=click.Choice(["json", "ids", "count"]), default="json", show_default=True,
              help="json: the cells with their parameters; ids: one id per line; count: how many.")
@link_option
def expand(spec: str, sweep_name: str | None, fmt: str, link: LinkBackend | None) -> None:
    """Print the cells of SPEC (a file or preset name) with their content-addressed ids."""
    from ccsweep.expand import expand as expand_cells

    sweep = _load(spec, sweep_name, link=link)
    try:
        cells = expand_cells(sweep)
    except SpecError as exc:
        fail(exc)
    if fmt == "count":
        click.echo(len({c.id for c in cells}))
    elif fmt == "ids":
        click.echo("\n".join(dict.fromkeys(c.id for c in cells)))
    else:
        click.echo(json.dumps([c.model_dump(mode="json") for c in cells], separators=(",", ":")))


@main.command()
@click.argument("spec", required=False)
@store_option
@click.option("--sweep", "sweep_name", help="Store under this sweep name instead of the spec's (empty: the spec's).")
@pushgateway_option("Push the sweep's cell counts (total, cached) to this Prometheus Pushgateway.")
@click.option("--spec-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Plan the spec in this file instead of SPEC when the file is not empty (an Argo "
                   "workflow's inline spec: an artifact that is empty when none was given).")
@revise_option
@click.option("--revise-if", default="false", metavar="true|false", callback=_true_or_false,
              help="--revise when true, not when false (an Argo sweep's `revise` parameter: a submission that "
                   "says to replace the sweep's plan); anything else is refused.")
@time_scale_option
@link_option
@click.option("--chunks-file", type=click.Path(path_type=Path, dir_okay=False),
              help="When more than --chunk-size cells are to run, write the chunks holding them here "
                   "([{chunk, cells}], JSON) and print [] (an Argo sweep then runs one Workflow per chunk); "
                   "else write [].")
@click.option("--chunk-size", type=click.IntRange(min=1), default=CHUNK_SIZE, show_default=True,
              help="Cells per chunk: chunk I is the plan's distinct cells I*SIZE up to (I+1)*SIZE.")
@click.option("--name-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the planned sweep's name here (an Argo sweep's later steps read it: without --sweep the "
                   "name is derived from the spec, --link and --time-scale).")
@click.option("--check-nodes", is_flag=True,
              help="Read the cluster's nodes (their ccsweep.io/cc-* labels) and leave out the cells no node can run, "
                   "recorded as unplaceable with why (the verdict and the report count them apart); needs "
                   "get/list on nodes. An Argo sweep's plan step does this, so such cells never wait Pending.")
@click.option("--unplaceable", "on_unplaceable", type=click.Choice(["skip", "fail"]), default="skip",
              show_default=True,
              help="With --check-nodes: skip such cells (the rest run), or fail the plan at once (exit 3) saying why.")
@click.option("--chunk", type=click.IntRange(min=0), metavar="I",
              help="Print only the cells of chunk I not stored yet, read from the stored manifest of --sweep "
                   "(nothing is planned or expanded; SPEC is not needed).")
@click.option("--round", "round_number", type=click.IntRange(2, 1000), metavar="N",
              help="Round N of a sweep with adaptive repetitions: print the cells its rule wants now, judged "
                   "from the stored results, read from the stored manifest of --sweep (SPEC is not needed).")
@click.option("--rounds-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the number of rounds the sweep needs at most here (1 without adaptive repetitions).")
@click.option("--pending-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the number of cells to run now here (an Argo sweep's next round runs only if it is > 0).")
@click.option("--image", help="The image cell pods run, printed in each item once checked against --allowed-images.")
@click.option("--allowed-images", envvar="CCSWEEP_ALLOWED_IMAGES", default="", show_envvar=True,
              help="Comma-separated images --image may name (`*` matches any characters); the chart sets them "
                   "(its image and operator.allowedImages). Empty: any well-formed image.")
@click.option("--cell-cpu", default="",
              help=f"Every cell pod's CPU request on its first attempt ({CPU_BOUNDS}), in place of the cost "
                   "model's (empty: the model's, per cell; docs/kubernetes.md). A retry asks for twice as much.")
@click.option("--cell-memory", default="",
              help=f"Every cell pod's memory request and limit on its first attempt ({MEMORY_BOUNDS}), in place "
                   "of the model's (empty: the model's, per cell). A retry asks for twice as much.")
@lateness_threshold_option
def plan(spec: str | None, store_url: str, sweep_name: str | None, pushgateway: str | None,
         spec_file: Path | None, revise: bool, revise_if: bool, time_scale: float | None, link: LinkBackend | None,
         chunks_file: Path | None, chunk_size: int, name_file: Path | None, check_nodes: bool, on_unplaceable: str,
         chunk: int | None, round_number: int | None, rounds_file: Path | None, pending_file: Path | None,
         image: str | None, allowed_images: str, cell_cpu: str, cell_memory: str,
         lateness_threshold_us: float | None) -> None:
    """Plan SPEC once: store its manifest (every cell, resolved); print the cells still to run as JSON.

    Planning a spec whose manifest is stored reads that manifest instead of expanding again. Fast
    cells to run whose sender writes small messages are named in one note on stderr, as `ccsweep run`
    names them (docs/spec.md, message_bytes).

    Each item: {id, experiment, node_selector, deadline_s, link, cpu, memory, retry_cpu, retry_memory[,
    image]}; deadline_s bounds the cell pod (its flows plus the overhead budget, see
    plan.pod_deadline_s); link, the cell's link backend, picks the cell pod's template (its
    descriptor's pod_template, linkdesc); node_selector (an object of node labels) asks for nodes
    whose kernel offers the cell's algorithms, as labelled by the chart's node probe. cpu and memory are the first
    attempt's requests, from the cell's cost model or --cell-cpu and --cell-memory, retry_cpu and
    retry_memory every retry's (twice as much, at most what the largest node holds: podrequests.py);
    image is --image. All are checked (podspec.py): a value the checks refuse is one line and exit 2,
    before anything is planned. These fields are the only values of a cell pod's spec that come from
    a Workflow's parameters. With --check-nodes, a cell whose pod no node offering its algorithms can
    hold is unplaceable, as one no node offers them. --lateness-threshold-us is checked here, so a
    bad one fails the plan before any pod starts; the cell pods take it from the same workflow
    parameter.

    This is the first step of an Argo sweep: its output feeds the fan-out (withParam), and each pod
    finds its cell again with `ccsweep cell --sweep NAME --id ID`. A sweep with more cells to run
    than one Workflow carries is cut into chunks (--chunks-file): each runs in a Workflow of its own,
    whose first step prints its cells with --chunk. A sweep with adaptive repetitions plans again
    after each round (--round), until no cell wants more runs or --rounds-file's bound is reached.
    """
    from ccsweep.clusternodes import NodesUnreadable
    from ccsweep.linkrules import small_writes_note
    from ccsweep.planning import Chunk, FreshPlan, PlanRequest, Round, UnplaceableRefused, plan_step

    sweep_name = sweep_name or None  # an Argo sweep passes its `sweep` parameter, empty when not set
    pod, sizing = _cell_pod(image, allowed_images, cell_cpu, cell_memory)
    if lateness_threshold_us is not None:
        click.echo(f"cells are judged late above a p99 lateness of {lateness_threshold_us:,.0f} us "
                   "(--lateness-threshold-us), not their own thresholds", err=True)
    if chunk is not None:
        if sweep_name is None:
            fail("--chunk reads a planned sweep's manifest: give --sweep")
        if name_file is not None:
            name_file.write_text(_sweep(sweep_name))
    store = _open(store_url)
    request: PlanRequest
    if chunk is not None and sweep_name is not None:
        request = Chunk(_sweep(sweep_name), chunk)
    elif round_number is not None:  # a later round of an adaptive sweep: judged again from what is stored
        if sweep_name is None:
            fail("--round reads a planned sweep's manifest: give --sweep")
        request = Round(_sweep(sweep_name), round_number)
    else:
        inline = spec_file is not None and spec_file.is_file() and spec_file.stat().st_size > 0
        if not inline and spec is None:
            fail("give SPEC (or --spec-file), or --sweep with --chunk or --round")
        request = FreshPlan(_load(str(spec_file) if inline else spec or "", sweep_name, time_scale, link),
                            revise or revise_if, check_nodes, refuse_unplaceable=on_unplaceable == "fail")
    try:
        outcome = plan_step(store, request, chunk_size=chunk_size, sizing=sizing, keep_all=chunks_file is None,
                            warn=lambda line: click.echo(line, err=True))
    except (SpecError, StoreError) as exc:
        fail(exc)
    except NodesUnreadable as exc:
        fail(f"--check-nodes: {exc} (try again)", code=EXIT_RETRY)
    except UnplaceableRefused as exc:
        fail(exc, code=EXIT_UNAVAILABLE)
    if isinstance(request, Chunk) and outcome.cells is not None:
        first = request.index * chunk_size
        click.echo(f"sweep {outcome.sweep}: chunk {request.index} (cells {first}-{first + chunk_size - 1}): "
                   f"{len(outcome.cells)} to run", err=True)
        click.echo(_plan_items(outcome.cells, pod, outcome.sizing))
        return
    assert outcome.survey is not None
    if isinstance(request, FreshPlan):
        _say_unplaceable(outcome.sweep, outcome.survey.unplaceable)
        small_writes = small_writes_note(outcome.survey.small_writes)
        if small_writes:
            click.echo(small_writes, err=True)
    _plan_outputs(outcome.sweep, outcome.survey, pushgateway, name_file, rounds_file, pending_file, chunks_file,
                  chunk_size, pod, outcome.sizing, round_number=round_number or 1)


def _plan_outputs(name: str, found: Survey, pushgateway: str | None, name_file: Path | None,
                  rounds_file: Path | None, pending_file: Path | None, chunks_file: Path | None, chunk_size: int,
                  pod: dict[str, str], sizing: CellSizing, round_number: int = 1) -> None:
    """What the plan step prints and writes for a surveyed sweep (round `round_number` of one with
    adaptive repetitions)."""
    if name_file is not None:
        name_file.write_text(name)
    rounds = f"round {round_number} of at most {found.rounds}: " if found.points else ""
    settled = sum(p.settled for p in found.points)
    click.echo(f"sweep {name}: {rounds}{found.wanted} cells wanted"
               + (f" (of {found.planned} planned; {settled} of {len(found.points)} settings settled)"
                  if found.points else "")
               + f", {found.cached} already stored, {len(found.missing)} to run", err=True)
    if pushgateway:
        from ccsweep.metrics import SweepMetrics

        metrics = SweepMetrics(pushgateway, name, namespace=_pod_namespace())
        metrics.update(total=found.wanted, cached=found.cached)
        metrics.close()
    for path, value in ((rounds_file, found.rounds), (pending_file, len(found.missing))):
        if path is not None:
            path.write_text(str(value))
    chunks = found.chunks()
    if chunks_file is not None:
        chunks_file.write_text(json.dumps(chunks))
        if chunks:
            click.echo(f"sweep {name}: {len(found.missing)} cells to run in {len(chunks)} chunks of up to "
                       f"{chunk_size} cells", err=True)
    click.echo(_plan_items([] if chunks_file is not None and chunks else found.to_run, pod, sizing))


def _say_unplaceable(sweep: str, reasons: dict[str, str]) -> None:
    for reason in dict.fromkeys(reasons.values()):
        count = sum(r == reason for r in reasons.values())
        click.echo(f"sweep {sweep}: {count} cells unplaceable, not submitted: {reason}", err=True)


def _cell_pod(image: str | None, allowed_images: str, cpu: str, memory: str) -> tuple[dict[str, str], CellSizing]:
    """The checked image every item carries ({} or {image}) and how cell pods are sized (--cell-cpu
    and --cell-memory, empty: the cost model), or a one-line exit 2."""
    from ccsweep.podspec import PodValueError, check_cpu, check_image, check_memory

    allowed = [pattern.strip() for pattern in allowed_images.split(",") if pattern.strip()] or ["*"]
    try:
        sizing = CellSizing(cpu=check_cpu(cpu) if cpu else None, memory=check_memory(memory) if memory else None)
        values = {} if image is None else {"image": check_image(image, allowed)}
    except PodValueError as exc:
        fail(exc)
    return values, sizing


def _plan_items(cells: list[Cell], pod: dict[str, str], sizing: CellSizing) -> str:
    """The fan-out's items for `cells` (JSON): {id, experiment, node_selector, deadline_s, link}, `pod` and
    each cell's requests (podrequests.CellSizing: the cost model's unless overridden, and the retries')."""
    from ccsweep.plan import node_selector, pod_deadline_s

    return json.dumps([{"id": c.id, "experiment": c.experiment, "node_selector": node_selector(c),
                        "deadline_s": pod_deadline_s(c), "link": c.params.link, **pod, **sizing.item_fields(c)}
                       for c in cells])


@main.command()
@click.argument("spec")
@link_option
def validate(spec: str, link: LinkBackend | None) -> None:
    """Check SPEC without running anything; print its experiments and cell counts."""
    from ccsweep.expand import expand as expand_cells

    sweep = _load(spec, None, link=link)
    try:
        cells = expand_cells(sweep)
    except SpecError as exc:
        fail(exc)
    for exp in sweep.experiments:
        n = sum(1 for c in cells if c.experiment == exp.name)
        click.echo(f"{exp.name}: {n} cells of {exp.duration_s:g} s")
    click.echo(f"{sweep.name}: {len({c.id for c in cells})} cells, valid")


@main.command()
@click.argument("specs", nargs=-1, required=True)
@click.option("--cores", "cores_list", type=click.IntRange(1, 4096), multiple=True, default=(2, 8, 64),
              show_default=True, help="Machine sizes to estimate for (repeat the option); with --nodes, each node's.")
@click.option("--nodes", "nodes_list", type=click.IntRange(1, 100_000), multiple=True,
              help="Estimate the Argo workflow on clusters of this many nodes of --cores cores each instead (repeat "
                   "the option): cell pods packed by their requests, each held for its flow plus the measured slot "
                   "overhead.")
@click.option("--parallelism", type=click.IntRange(1, 100_000), default=50, show_default=True,
              help="With --nodes: the Workflow's cell pods at once (the sweep template's spec.parallelism).")
@click.option("--cell-cpu", default="",
              help="With --nodes: every cell pod's CPU request in place of its cost model's (the workflow's cell-cpu).")
@time_scale_option
@link_option
def estimate(specs: tuple[str, ...], cores_list: tuple[int, ...], nodes_list: tuple[int, ...], parallelism: int,
             cell_cpu: str, time_scale: float | None, link: LinkBackend | None) -> None:
    """Estimate the wall time of SPECS (run one after the other, as one study) on machines of N cores,
    or with --nodes through Argo on clusters of N nodes.

    Each cell's cost is the admission's model of it (fitted to measured cells), its time its flow
    time plus set-up; the local executor's admission is played on a simulated clock. With --nodes,
    each cell pod asks for the plan step's requests (the same model) and holds its place for its
    flow time plus the slot overhead measured through Argo (clusterestimate.py). Late re-runs are
    not counted.
    """
    from ccsweep.estimate import estimate_wall, format_duration
    from ccsweep.expand import expand as expand_cells

    cells: list[Cell] = []
    for spec in specs:
        try:
            cells += list({c.id: c for c in expand_cells(_load(spec, None, time_scale, link))}.values())
        except SpecError as exc:
            fail(exc)
    flow_s = sum(c.params.duration_s for c in cells)
    click.echo(f"{' + '.join(specs)}: {len(cells)} cells, {format_duration(flow_s)} of flow time one after the other")
    if nodes_list:
        _estimate_cluster(cells, nodes_list, cores_list, parallelism, cell_cpu)
        return
    for cores in cores_list:
        result = estimate_wall(cells, cores)
        refused = f"; {result.refused} cells refused: they need more than this machine" if result.refused else ""
        click.echo(f"{cores:5d} cores: {format_duration(result.wall_s):>14}  (up to {result.peak_cells} cells at "
                   f"once, {result.mean_cores_busy:.1f} cores busy on average{refused})")


def _estimate_cluster(cells: list[Cell], nodes_list: tuple[int, ...], cores_list: tuple[int, ...], parallelism: int,
                      cell_cpu: str) -> None:
    """`estimate --nodes`: a line per cluster size, through Argo (clusterestimate.estimate_cluster)."""
    from ccsweep.clusterestimate import SLOT_OVERHEAD_S, estimate_cluster
    from ccsweep.estimate import format_duration
    from ccsweep.podspec import PodValueError, check_cpu

    try:
        sizing = CellSizing(cpu=check_cpu(cell_cpu) if cell_cpu else None)
    except PodValueError as exc:
        fail(exc)
    click.echo(f"through Argo: pods at their requests ({'cell-cpu ' + cell_cpu if cell_cpu else 'cost model'}, "
               f"with Argo's wait container), {SLOT_OVERHEAD_S:g} s of slot overhead each, parallelism {parallelism}")
    for nodes in nodes_list:
        for cores in cores_list:
            result = estimate_cluster(cells, nodes, cores, sizing=sizing, parallelism=parallelism)
            unplaceable = (f"; {result.unplaceable} cells unplaceable: no node holds their pods"
                           if result.unplaceable else "")
            click.echo(f"{nodes:5d} nodes x {cores} cores: {format_duration(result.wall_s):>14}  (up to "
                       f"{result.peak_pods} pods at once{unplaceable})")


@main.command()
@click.option("--check", "check_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Compare FILE with the generated CRD instead of printing it; exit 1 if they differ.")
def crd(check_file: Path | None) -> None:
    """Print the Sweep CustomResourceDefinition, generated from the spec's pydantic models."""
    from ccsweep.crd import render_crd

    text = render_crd()
    if check_file is None:
        click.echo(text, nl=False)
    elif not check_file.is_file() or check_file.read_text() != text:
        fail(f"{check_file} differs from `ccsweep crd` (regenerate: ccsweep crd > {check_file})", code=1)


@main.command()
def presets() -> None:
    """List the sweep presets (spec files on the search path)."""
    seen = set()
    for directory in sweep_search_path():
        for path in sorted(directory.glob("*.yaml")):
            if path.stem in seen:
                continue
            seen.add(path.stem)
            try:
                description = load_spec(str(path)).description.strip().splitlines()[0]
            except (SpecError, IndexError):
                description = ""
            click.echo(f"{path.stem:18} {description}  ({path})")


@main.command()
@click.option("--cell", "cell_arg", metavar="JSON|@FILE|-",
              help="The cell as printed by `ccsweep expand` (one element), a file (@path) or - for stdin.")
@click.option("--sweep", "sweep_name", help="With --id: the planned sweep whose stored manifest holds the cell.")
@click.option("--id", "cell_id", help="With --sweep: the cell's id (as printed by `ccsweep plan`).")
@store_option
@click.option("--workdir", type=click.Path(path_type=Path), help="Scratch folder (default: a temporary one).")
@pushgateway_option("Push live metrics to this Prometheus Pushgateway (host:port or URL).")
@lateness_threshold_option
@click.option("--executor", default="local", show_default=True, help="Recorded in the result: local, argo, operator.")
@click.option("--attempt", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="Which run of this cell this is (recorded; the executor counts re-runs of late cells).")
@click.option("--node-selector", "node_selector_json", metavar="JSON",
              help="In a cell pod: the node selector its template was given; the cell does not run unless it "
                   "is exactly the one the plan gives this cell.")
@click.option("--pod-cpu-milli", type=int, envvar="CCSWEEP_POD_CPU_MILLI", show_envvar=True,
              help="In a cell pod: its CPU request in millicores (the template sets it from the downward API); "
                   f"the cell does not run outside {CPU_BOUNDS}.")
@click.option("--pod-memory-bytes", type=int, envvar="CCSWEEP_POD_MEMORY_BYTES", show_envvar=True,
              help="In a cell pod: its memory limit in bytes (from the downward API); the cell does not run "
                   f"outside {MEMORY_BOUNDS}.")
def cell(cell_arg: str | None, sweep_name: str | None, cell_id: str | None, store_url: str, workdir: Path | None,
         pushgateway: str | None, lateness_threshold_us: float | None, executor: str, attempt: int,
         node_selector_json: str | None, pod_cpu_milli: int | None, pod_memory_bytes: int | None) -> None:
    """Run one cell and store its result; print a one-line JSON report.

    Exit status: 0 stored or already stored (or, run locally, kept in the spool for the store),
    1 failed, 2 bad input, 3 algorithm not in this kernel, 75 run it again: measured with the
    emulator late or starved by the machine (either kept as an attempt, not counted: see
    docs/reliability.md), the store unreachable, or, outside the local
    executor, the result kept only on this machine (a pod's disk does not outlive the pod).
    """
    from ccsweep.cellrun import run_and_store
    from ccsweep.plan import node_selector_refusal

    _check_pod_resources(pod_cpu_milli, pod_memory_bytes)
    store = _open(store_url)
    the_cell = _cell_from_args(cell_arg, sweep_name, cell_id, store)
    if node_selector_json is not None and (refused := node_selector_refusal(node_selector_json, the_cell)):
        fail(refused)
    outcome = run_and_store(the_cell, store, workdir=workdir, pushgateway=pushgateway, namespace=_pod_namespace(),
                            lateness_threshold_us=lateness_threshold_us, executor=executor, attempt=attempt,
                            cpu_milli=pod_cpu_milli)
    click.echo(json.dumps(outcome.report()))
    sys.exit(_cell_exit(outcome, executor))


def _check_pod_resources(cpu_milli: int | None, memory_bytes: int | None) -> None:
    """A cell pod's own CPU request and memory limit, as Kubernetes made the pod, within the bounds the
    plan step checks (podspec.py): a pod of the cell template given other values, by a sweep or by a
    Workflow naming the template directly, stops here with one line and exit 2 (not retried)."""
    from ccsweep.podspec import PodValueError, check_cpu_milli, check_memory_bytes

    try:
        if cpu_milli is not None:
            check_cpu_milli("--pod-cpu-milli (this pod's CPU request)", f"{cpu_milli}m", cpu_milli)
        if memory_bytes is not None:
            check_memory_bytes("--pod-memory-bytes (this pod's memory limit)", str(memory_bytes), memory_bytes)
    except PodValueError as exc:
        fail(exc)


def _cell_exit(outcome: CellOutcome, executor: str) -> int:
    """The exit status of `ccsweep cell` (see its help): nothing run, else the result's status, then where it is."""
    if outcome.status == "cached":
        return 0
    if outcome.status == "unavailable":
        return EXIT_UNAVAILABLE
    if outcome.status == "interrupted" or outcome.interrupted:
        return EXIT_INTERRUPTED
    if outcome.status in RERUN_STATUSES:
        return EXIT_RETRY
    if outcome.status != "ok":
        return 1
    if outcome.stored or (outcome.spooled is not None and executor == "local"):
        return 0
    return EXIT_RETRY


def _cell_from_args(cell_arg: str | None, sweep_name: str | None, cell_id: str | None, store: ResultStore) -> Cell:
    if (cell_arg is None) == (cell_id is None) or (cell_id is None) != (sweep_name is None):
        fail("give --cell, or --sweep with --id")
    if cell_arg is None:
        from ccsweep.plan import cell_from_manifest

        try:
            return cell_from_manifest(store, _sweep(sweep_name or ""), cell_id or "")
        except (SpecError, StoreError) as exc:
            fail(exc)
    try:
        text = (sys.stdin.read() if cell_arg == "-" else Path(cell_arg[1:]).read_text() if cell_arg.startswith("@")
                else cell_arg)
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--cell {cell_arg[:200]}: cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})")
    try:
        return Cell.model_validate_json(text)
    except ValidationError as exc:
        fail(f"--cell: {one_line(exc)}")


@main.command()
@click.argument("spec")
@store_option
@click.option("--sweep", "sweep_name", help="Store under this sweep name instead of the spec's.")
@click.option("--jobs", type=click.IntRange(1, 256),
              help="Cells at once: start with this many and never exceed it (default: start with one and grow as "
                   "the CPU budget and the cells' lateness allow); a late cell still halves it.")
@click.option("--cpu-budget", type=click.FloatRange(0.1, 1024),
              help="Cores the cells may use (default: all but half a core).")
@click.option("--max-attempts", type=click.IntRange(1, 10), default=3, show_default=True,
              help="Runs of a cell at most while its emulator comes back late or the machine starves it "
                   "(such a run is kept, never counted).")
@click.option("--max-failed-cells", type=click.IntRange(0, 1_000_000),
              help="Failure budget: once more cells than this have failed, start no new cell (running ones "
                   "finish). Default: no budget.")
@click.option("--workdir", type=click.Path(path_type=Path),
              help="Scratch folder for running cells (default: temporary).")
@pushgateway_option("Push live metrics of every cell to this Prometheus Pushgateway.")
@lateness_threshold_option
@click.option("--figures/--no-figures", default=True, show_default=True,
              help="Build figures and the report at the end.")
@revise_option
@time_scale_option
@link_option
def run(spec: str, store_url: str, sweep_name: str | None, jobs: int | None, cpu_budget: float | None,
        max_attempts: int, max_failed_cells: int | None, workdir: Path | None, pushgateway: str | None,
        lateness_threshold_us: float | None, figures: bool, revise: bool, time_scale: float | None,
        link: LinkBackend | None) -> None:
    """Run every cell of SPEC not already stored, then build its figures.

    Resumable: stored cells are not run again. Ctrl-C stops running cells cleanly and keeps every
    finished result. Cells start one at a time; how many run at once follows what they cost and
    whether their emulator kept time, and after a late attempt what its record measured of why. A
    cell whose emulator ran late, or that the machine starved (a wait on its processes ran out),
    runs again, asking for more CPU headroom, and alone on its last attempt; a cell late (starved) on every attempt
    counts as `late` (`starved`), is left out of figures, and the exit status is 1.
    """
    from ccsweep.bpfregister import BpfUnavailable
    from ccsweep.executor import HostCannotRun, SweepSummary, notice, run_sweep, summary_table

    sweep = _load(spec, sweep_name, time_scale, link)
    store = _open(store_url)
    console = Console(stderr=True)
    scratch = workdir or Path(tempfile.mkdtemp(prefix="ccsweep-run-"))
    summary: SweepSummary | None = None
    try:
        summary = run_sweep(sweep, store, workdir=scratch, cpu_budget=cpu_budget, jobs=jobs,
                            pushgateway=pushgateway, console=console, max_attempts=max_attempts, revise=revise,
                            max_failed_cells=max_failed_cells, lateness_threshold_us=lateness_threshold_us)
    except (SpecError, StoreError, BpfUnavailable, HostCannotRun) as exc:
        fail(exc)
    finally:
        kept = summary.kept_in if summary else []
        if workdir is None and not kept:  # a cell's record left in its folder outlives the run
            shutil.rmtree(scratch, ignore_errors=True)
    assert summary is not None
    for folder in kept:
        notice(console, f"a measured result could be neither stored nor spooled; it stays in {folder}")
    console.print(summary_table(summary))
    counts = summary.counts()
    console.print(f"{counts['ok']} cells measured on time ({summary.reruns} late or starved attempt(s) run "
                  f"again), {counts['cached']} already stored, {counts['late']} late on every attempt, "
                  f"{counts['starved']} starved on every attempt, "
                  f"{counts['failed']} failed", soft_wrap=True)
    if summary.stopped:
        notice(console, f"stopped: {summary.stopped}")
    if summary.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if figures:
        try:
            _write_figures(store, sweep.name, console)
        except StoreError as exc:  # the sweep's own status matters more than figures that can wait
            notice(console, f"figures not built yet: {exc}")
            notice(console, f"  build them once the store is back: ccsweep figures --store {store.url} "
                            f"--sweep {sweep.name}")
    sys.exit(1 if counts["failed"] or counts["late"] or counts["starved"] else 0)


@main.command()
def gc() -> None:
    """Remove what dead cells left behind on this machine: their network namespaces and processes.

    A cell killed with SIGKILL (or a machine that lost power) cannot clean up after itself. Its
    namespaces carry its runner's pid; those whose runner is gone are deleted, with the cell's
    processes still in them. Live cells, of this run or another, are never touched. BPF congestion
    controls a killed `ccsweep run` registered are unregistered. `ccsweep run` does this before it starts.
    """
    from ccsweep.bpfregister import BpfUnavailable, recover
    from ccsweep.runner.netns import remove_leftovers

    removed = remove_leftovers()
    click.echo(f"removed {len(removed)} namespace(s) of dead cells" + (f": {' '.join(removed)}" if removed else ""))
    try:
        unregistered = recover()
    except (BpfUnavailable, OSError) as exc:
        fail(exc)
    if unregistered:
        click.echo(f"unregistered BPF congestion control(s) of dead runs: {' '.join(unregistered)}")


@main.group()
def bpf() -> None:
    """ccsweep's BPF congestion controls on this machine (docs/runner.md, "BPF congestion controls")."""


@bpf.command()
@click.argument("names", nargs=-1, metavar="NAME...")
def hold(names: tuple[str, ...]) -> None:
    """Register the BPF congestion controls NAME... and hold them until SIGTERM or SIGINT.

    What the chart's node setup runs: it registers ccsweep's own objects ($CCSWEEP_BPF_DIR), those
    of the admin's list only, and publishes their digests for the cell pods on this node
    ($CCSWEEP_BPF_HELD), so their records say what ran. On SIGTERM or SIGINT it unregisters
    exactly what it registered; a holder killed outright leaves them to the next start, which
    unregisters them first ($CCSWEEP_BPF_STATE, as `ccsweep run` does). Exit 2 for a name ccsweep
    does not ship, 3 when this machine cannot register one (one line saying why).
    """
    import signal
    import threading

    from ccsweep.bpfcc import PROGRAMS
    from ccsweep.bpfregister import BpfUnavailable, holding

    if not names:
        fail(f"NAME: give one or more of {', '.join(sorted(PROGRAMS))}")
    for name in names:
        if name not in PROGRAMS:
            fail(f"NAME {name[:32]!r}: expected one of {', '.join(sorted(PROGRAMS))}")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        with holding(names) as programs:
            for name, digest in programs.items():
                click.echo(f"registered {name} (sha256 {digest})", err=True)
            click.echo("holding them until SIGTERM", err=True)
            while not stop.wait(3600):
                pass
    except (BpfUnavailable, OSError) as exc:
        fail(exc, code=EXIT_UNAVAILABLE)
    click.echo(f"unregistered {' '.join(programs)}", err=True)


@main.command(name="upload-spool")
@click.option("--store", "store_url", help="Only the cells spooled for this store (default: every store).")
@click.option("--spool", "spool_dir", type=click.Path(path_type=Path, file_okay=False),
              help="The spool folder (default: $CCSWEEP_SPOOL, else ~/.cache/ccsweep/spool).")
def upload_spool(store_url: str | None, spool_dir: Path | None) -> None:
    """Upload results kept in the local spool while their store was unreachable.

    Exit status: 0 when the spool is empty afterwards, 1 when a store still does not take them
    (unreachable, or refusing: each store's line says why).
    """
    from ccsweep.store.spool import Spool

    spool = Spool(spool_dir)
    urls = [store_url] if store_url else spool.targets()
    remaining = 0
    for url in urls:
        report = spool.flush(_open(url))
        remaining += len(report.remaining)
        line = f"{url}: uploaded {len(report.uploaded)}, {len(report.remaining)} left"
        click.echo(line + (f" ({report.error})" if report.error else ""), err=True)
    if not urls:
        click.echo("spool is empty", err=True)
    sys.exit(1 if remaining else 0)


@main.command()
@store_option
@click.option("--sweep", "sweep_name", required=True, help="The planned sweep to check.")
def status(store_url: str, sweep_name: str) -> None:
    """How complete a planned sweep is: its cells with and without a stored result.

    Exit status: 0 when every cell of the sweep's manifest has an on-time result (with adaptive
    repetitions: every run its rule wants after the runs stored) or was set aside as unplaceable by
    the plan step (no node could run it; counted apart), 1 otherwise (then the cells without one
    are listed; cells measured only while the emulator ran late are counted as late). The last
    step of an Argo sweep runs this: the store, not
    Argo's step status (which says Succeeded for a fan-out that continues on failure), decides
    whether the sweep is complete.
    """
    from ccsweep.sweep_status import sweep_status

    store = _open(store_url)
    sweep_name = _sweep(sweep_name)
    try:
        if get_manifest(store, sweep_name) is None:
            fail(f"sweep {sweep_name!r} has no manifest in {store.url} (run `ccsweep plan` or `ccsweep run` first)")
        found = sweep_status(store, sweep_name)
    except StoreError as exc:
        fail(exc)
    missing = found.ids("late", "failed", "starved", "missing")
    starved = found.by_state["starved"]
    starved_text = f", {starved} starved: the machine starved an attempt" if starved else ""
    set_aside = found.by_state["unplaceable"]
    unplaceable_text = f"; {set_aside} unplaceable: no node could run them (see the report)" if set_aside else ""
    click.echo(f"sweep {sweep_name}: {found.wanted} cells, {found.by_state['stored']} stored, "
               f"{len(missing)} without a result ({found.by_state['late']} late: measured only with the emulator late"
               f"{starved_text}){unplaceable_text}")
    if missing:
        click.echo(f"without a result: {' '.join(missing)} (see {attempt_folders_text()} in {store.url}; "
                   "run the sweep again to retry them)", err=True)
        sys.exit(1)


@main.command(name="figures")
@store_option
@click.option("--sweep", "sweep_name", required=True, help="The sweep whose stored results to draw.")
@pushgateway_option("Then keep the sweep's final results in its Pushgateway group and delete its "
                                    "cells' groups (the last step of an Argo sweep does this).")
def figures_cmd(store_url: str, sweep_name: str, pushgateway: str | None) -> None:
    """Build figures (PNG, SVG), the HTML report and the ReBBR CSV from stored results only."""
    sweep_name = _sweep(sweep_name)
    _build_figures(store_url, sweep_name, Console(stderr=True))
    if pushgateway:
        from ccsweep.metrics import publish_stored

        try:
            deleted = publish_stored(pushgateway, _open(store_url), sweep_name, namespace=_pod_namespace())
        except StoreError as exc:
            fail(exc)
        click.echo(f"final results of {sweep_name} kept in its Pushgateway group; {deleted} cell group(s) deleted",
                   err=True)


@main.command(name="compare")
@click.argument("side_a", metavar="A")
@click.argument("side_b", metavar="B")
@store_option
@click.option("--store-b", "store_b_url", help="B's store when it is another (two ccsweep versions); default --store.")
@click.option("--ignore", multiple=True, metavar="PARAM",
              help="Match cells that differ only in this parameter (link, link_offload, kernel or cc; link "
                   "takes its offloads along, cc its BPF objects); repeatable.")
@click.option("--quantity", help="goodput, goodput-steady or bottleneck-throughput [default: goodput; "
                                 "bottleneck-throughput against a CSV, which is ReBBR's \"goodput\"].")
@click.option("--tolerance", type=float, default=0.10, show_default=True,
              help="agree when the difference's interval lies within this fraction of the larger median.")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="differ needs the difference's interval to exclude 0 and the Mann-Whitney p-value below this.")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write the comparison as CSV here ('-': standard output, instead of the table).")
def compare_cmd(side_a: str, side_b: str, store_url: str, store_b_url: str | None, ignore: tuple[str, ...],
                quantity: str | None, tolerance: float, alpha: float, csv_path: Path | None) -> None:
    """Compare two sets of results for the same cells as distributions.

    A and B are each SWEEP, SWEEP/EXPERIMENT, either with @link=VALUE, @link_offload=VALUE,
    @kernel=VALUE or @cc=VALUE to keep only those cells, or published:NAME (ReBBR's CSV of a figure,
    e.g. published:rebbr-figure8), or csv:PATH (any CSV in ReBBR's columns), either with @cc=VALUE. Cells match on every
    parameter but the run's seed and repetition and the --ignore'd ones. For each matched cell: n on
    each side, the medians, the difference of medians with its 95 % bootstrap interval, the
    Mann-Whitney p-value (and in the CSV the Anderson-Darling one), and a verdict: agree, differ or
    not settled; then, across six cells or more, the Wilcoxon signed-rank test of the per-cell
    differences. Examples: the two links of one study, `ccsweep compare full-sweep
    full-sweep-mahimahi --ignore link`; a kernel axis, `ccsweep compare S@kernel=6.1.0
    S@kernel=6.8.0 --ignore kernel`; ccsweep-link's offloads on and off, `ccsweep compare
    S@link_offload=tso S@link_offload=none --ignore link_offload`; two algorithms, `ccsweep compare
    rebbr-pacing@cc=bbr rebbr-pacing@cc=bbr_unpaced --ignore cc`; ReBBR's numbers, `ccsweep compare
    figure8 published:rebbr-figure8`, or its BBR against another, `ccsweep compare
    rebbr-pacing@cc=bbr_unpaced published:rebbr-figure8@cc=bbr --ignore cc`. Exit status 0
    whatever the verdicts; 2 for a side or option that cannot be compared.
    """
    from ccsweep import compare as cmp

    try:
        ignored = cmp.parse_ignore(ignore)
        refs = cmp.parse_side(side_a, "A"), cmp.parse_side(side_b, "B")
        against_csv = any(r.kind != "sweep" for r in refs)
        chosen = cmp.check_quantity(quantity or ("bottleneck-throughput" if against_csv else "goodput"))
        stores = (_open(store_url) if refs[0].kind == "sweep" else None,
                  _open(store_b_url or store_url) if refs[1].kind == "sweep" else None)
        sides = [cmp.read_side(ref, store, chosen, ignored) for ref, store in zip(refs, stores, strict=True)]
        result = cmp.compare(sides[0], sides[1], chosen, ignored, tolerance=tolerance, alpha=alpha)
    except (cmp.CompareError, StoreError) as exc:
        fail(exc)
    if csv_path is not None and str(csv_path) == "-":
        click.echo(cmp.to_csv(result), nl=False)
        return
    console = Console()
    console.print(cmp.table(result))
    console.print(cmp.summary_line(result), highlight=False, soft_wrap=True)
    if (overall := cmp.pooled(result)) is not None:
        console.print(overall, highlight=False, soft_wrap=True)
    if csv_path is not None:
        csv_path.write_text(cmp.to_csv(result))
        console.print(f"wrote {csv_path}", highlight=False, soft_wrap=True)


@main.command(name="export")
@store_option
@click.option("--sweep", "sweep_name", required=True, help="The sweep whose stored results to export.")
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet"]), default="csv", show_default=True,
              help="csv needs nothing more; parquet needs the data extra (pip install 'ccsweep[data]').")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("."),
              show_default=True, help="Folder to write SWEEP-cells.FORMAT and SWEEP-flows.FORMAT into.")
def export_cmd(store_url: str, sweep_name: str, fmt: str, out_dir: Path) -> None:
    """Write a sweep's results as two tidy tables: one row per stored cell, one per flow.

    Every parameter is a column (uplink_loss, uplink_queue_bytes, ...), beside every measurement,
    the link backend, the kernel, the ccsweep version, the cell id, the repetition and where the
    cell's raw record is stored. docs/analysis.md lists the columns; ccsweep.load(STORE, SWEEP)
    returns the same table as a pandas DataFrame.
    """
    from ccsweep.results.data import load_sweep
    from ccsweep.results.tidy import tables, write_csv

    sweep_name = _sweep(sweep_name)
    store = _open(store_url)
    if fmt == "parquet":
        try:
            from ccsweep.analysis import frame
        except ImportError as exc:
            fail(exc)
    click.echo(f"reading the stored cells of {sweep_name} from {store.url} ...", err=True)
    try:
        cells, flows = tables(load_sweep(store, sweep_name), store.location)
    except StoreError as exc:
        fail(exc)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("cells", cells), ("flows", flows)):
        path = out_dir / f"{sweep_name}-{name}.{fmt}"
        if fmt == "csv":
            path.write_text(write_csv(rows))
        else:
            frame(rows).to_parquet(path, engine="pyarrow", index=False)
        click.echo(f"wrote {path} ({len(rows)} rows)", err=True)


def _build_figures(store_url: str, sweep_name: str, console: Console) -> None:
    try:
        _write_figures(_open(store_url), sweep_name, console)
    except StoreError as exc:
        fail(exc)


def _write_figures(store: ResultStore, sweep_name: str, console: Console) -> None:
    from ccsweep.figures import build_sweep_outputs
    from ccsweep.results.published_sets import PublishedDataError

    try:
        locations = build_sweep_outputs(store, sweep_name)
    except PublishedDataError as exc:
        fail(exc)
    for location in locations:
        console.print(f"wrote {location}", soft_wrap=True, highlight=False)


def _open(store_url: str) -> ResultStore:
    try:
        return open_store(store_url)
    except StoreError as exc:
        fail(exc)
