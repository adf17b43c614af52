"""Generate ccsweep's Grafana dashboards with grafana-foundation-sdk (the JSON files beside this script).

    python dashboards/generate.py          # rewrite dashboards/*.json
    python dashboards/generate.py --check  # exit 1 if a committed file differs (tests/unit/test_dashboards.py)

The dashboards are code so their queries can be reviewed and tested: tests/services evaluates every
panel's PromQL against a Prometheus that scraped real cells. Metric names are those of
src/ccsweep/metrics.py; the sweep:* and cell:* series are the recording rules in monitoring/rules.yml.
The Helm chart ships these files as ConfigMaps for Grafana's dashboard sidecar.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from grafana_foundation_sdk.builders import barchart, bargauge, common, dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import (
    BigValueColorMode,
    LegendDisplayMode,
    LegendPlacement,
    SortOrder,
    TooltipDisplayMode,
    VizOrientation,
)
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DashboardLinkType,
    DataSourceRef,
    DataTransformerConfig,
    Threshold,
    ThresholdsMode,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

HERE = Path(__file__).resolve().parent
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
SWEEP = 'sweep="$sweep"'
CELL = 'sweep="$sweep", cell="$cell"'
#: Cells of the sweep narrowed by the overview's multi-value variables (Grafana: `All` is `.*`).
PATH_VARIABLES = {"experiment": "Experiment", "rtt": "RTT", "bandwidth": "Bandwidth"}
CELLS = ", ".join([SWEEP, *(f'{name}=~"${name}"' for name in PATH_VARIABLES)])
#: Goodput vs loss, one row per (loss, series): `series` joins every label the recording rule keeps
#: apart besides loss, so two paths (RTTs, bandwidths, experiments) never fall into one bar.
GOODPUT_VS_LOSS = (f'label_join(sweep_algorithm_loss:ccsweep_cell_result_goodput_bits_per_second:avg{{{CELLS}}}, '
                   '"series", " ", "algorithm", "rtt", "bandwidth", "experiment")')
FLOW_LEGEND = "flow {{flow}} {{cc}}"
LAST = common.ReduceDataOptions().calcs(["lastNotNull"])
#: Where a sweep's Argo workflows and its report are, from the Sweeps dashboard's variables (Grafana
#: keeps them when a link passes them on): the Argo UI's address and namespace, and an HTTP address
#: serving the store's objects (a bucket behind a gateway or an S3 console's public link).
UID_SWEEPS, UID_OVERVIEW, UID_CELL = "ccsweep-sweeps", "ccsweep-sweep-overview", "ccsweep-cell-detail"
PASSED_ON = "&".join(f"var-{name}=${{{name}}}" for name in ("datasource", "argo_url", "namespace", "report_url"))
ARGO_WORKFLOWS = "${argo_url}/workflows/${namespace}?label=ccsweep.io%2Fsweep%3D"
REPORT = "${report_url}/sweeps/"
LEGEND = (common.VizLegendOptions().display_mode(LegendDisplayMode.LIST).placement(LegendPlacement.BOTTOM)
          .show_legend(True))
TOOLTIP = common.VizTooltipOptions().mode(TooltipDisplayMode.MULTI).sort(SortOrder.DESCENDING)


def query(expr: str, legend: str = "", ref: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend or "__auto").ref_id(ref).datasource(DATASOURCE)


def instant_table(expr: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).instant().format(PromQueryFormat.TABLE).ref_id("A").datasource(DATASOURCE)


def graph(title: str, unit: str, *targets: prometheus.Dataquery, span: int = 12,
          description: str = "") -> timeseries.Panel:
    # Legend and tooltip set explicitly: without them the SDK writes `"options": null`, which its
    # own Dashboard.from_json cannot read back.
    panel = (timeseries.Panel().title(title).unit(unit).datasource(DATASOURCE).height(8).span(span).fill_opacity(5)
             .legend(LEGEND).tooltip(TOOLTIP))
    if description:
        panel = panel.description(description)
    for target in targets:
        panel = panel.with_target(target)
    return panel


def big_number(title: str, unit: str, expr: str, span: int = 4, red_above: float | None = None) -> stat.Panel:
    steps = [Threshold(value=None, color="green")]
    if red_above is not None:
        steps.append(Threshold(value=red_above, color="red"))
    return (stat.Panel().title(title).unit(unit).datasource(DATASOURCE).height(4).span(span)
            .color_mode(BigValueColorMode.VALUE).reduce_options(LAST)
            .thresholds(dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps))
            .with_target(query(expr)))


def label_variable(name: str, label: str, selector: str = "") -> dashboard.QueryVariable:
    """A variable listing the values of a cell label (every cell pushes ccsweep_cell_duration_seconds)."""
    metric = f"ccsweep_cell_duration_seconds{{{selector}}}" if selector else "ccsweep_cell_duration_seconds"
    return (dashboard.QueryVariable(name).label(label).datasource(DATASOURCE).query(f"label_values({metric}, {name})")
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC))


def variables(builder: dashboard.Dashboard, *, with_cell: bool) -> dashboard.Dashboard:
    """Data source and sweep; then one cell (cell detail) or the paths of the sweep's cells (overview).

    A sweep may cross several experiments, RTTs and bandwidths: the overview's cell panels can be
    narrowed to some of them (multi-value, All by default).
    """
    builder = builder.with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    builder = builder.with_variable(label_variable("sweep", "Sweep"))
    if with_cell:
        return builder.with_variable(label_variable("cell", "Cell", SWEEP))
    selector = SWEEP
    for name, label in PATH_VARIABLES.items():
        builder = builder.with_variable(label_variable(name, label, selector).multi(True).include_all(True)
                                        .all_value(".*"))
        selector += f', {name}=~"${name}"'
    return builder


def link(title: str, url: str) -> dashboard.DashboardLink:
    return dashboard.DashboardLink(title).type(DashboardLinkType.LINK).url(url).target_blank(False)


def where_variables(builder: dashboard.Dashboard) -> dashboard.Dashboard:
    """The Argo UI, its namespace and the report's HTTP base: typed once on the Sweeps dashboard."""
    for name, label, default in (("argo_url", "Argo UI", "https://localhost:2746"),
                                 ("namespace", "Namespace", "ccsweep"), ("report_url", "Store over HTTP", "")):
        builder = builder.with_variable(dashboard.TextBoxVariable(name).label(label).default_value(default))
    return builder


def sweep_links(sweep: str) -> list[dashboard.DashboardLink]:
    """From one sweep to its overview, its Argo workflows and its report."""
    return [link(f"Sweep {sweep}: overview", f"/d/{UID_OVERVIEW}?var-sweep={sweep}&{PASSED_ON}"),
            link(f"Sweep {sweep}: Argo workflows", ARGO_WORKFLOWS + sweep),
            link(f"Sweep {sweep}: report", f"{REPORT}{sweep}/report.html")]


def base(title: str, uid: str, description: str) -> dashboard.Dashboard:
    return (dashboard.Dashboard(title).uid(uid).description(description).tags(["ccsweep"])
            .refresh("5s").time("now-30m", "now").timezone("browser").tooltip(DashboardCursorSync.CROSSHAIR)
            .readonly())


def sweep_overview() -> dashboard.Dashboard:
    builder = variables(base("ccsweep / Sweep overview", UID_OVERVIEW,
                             "Progress of a sweep, its running cells live, and goodput vs loss as cells finish."),
                        with_cell=False)
    to_cell = [link("Cell ${__field.labels.cell}: detail",
                    f"/d/{UID_CELL}?var-sweep=$sweep&var-cell=${{__field.labels.cell}}&{PASSED_ON}")]
    return (
        where_variables(builder)
        .links([link("All sweeps", f"/d/{UID_SWEEPS}?{PASSED_ON}"),
                link("Argo workflows of this sweep", ARGO_WORKFLOWS + "$sweep"),
                link("Report of this sweep", REPORT + "$sweep/report.html")])
        .with_row(dashboard.Row("Progress"))
        .with_panel(big_number("Progress", "percentunit", f"sweep:ccsweep_progress:ratio{{{SWEEP}}}"))
        .with_panel(big_number("ETA", "s", f"sweep:ccsweep_eta:seconds{{{SWEEP}}}"))
        .with_panel(big_number("Cells running", "none", f"sweep:ccsweep_cells:running{{{SWEEP}}}"))
        .with_panel(big_number("Cells failed", "none", f"sweep:ccsweep_cells:failed{{{SWEEP}}}", red_above=1))
        .with_panel(big_number("Cells flagged late", "none", f"sweep:ccsweep_cells_late:count{{{SWEEP}}}", red_above=1))
        .with_panel(big_number("Cells in the sweep", "none", f"sweep:ccsweep_cells:total{{{SWEEP}}}"))
        .with_panel(graph("Cells by state", "none",
                          query(f"sweep:ccsweep_cells:done{{{SWEEP}}}", "done", "A"),
                          query(f"sweep:ccsweep_cells:cached{{{SWEEP}}}", "cached", "B"),
                          query(f"sweep:ccsweep_cells:running{{{SWEEP}}}", "running", "C"),
                          query(f"sweep:ccsweep_cells:failed{{{SWEEP}}}", "failed", "D")))
        .with_panel(bargauge.Panel().title("Running cells: flow time done").unit("percentunit").min(0).max(1)
                    .datasource(DATASOURCE).height(8).span(12).orientation(VizOrientation.HORIZONTAL).reduce_options(LAST)
                    .data_links(to_cell)
                    .with_target(query(f"cell:ccsweep_cell_progress:ratio{{{CELLS}}}",
                                       "{{algorithm}} loss {{loss}} ({{cell}})")))
        .with_row(dashboard.Row("Live"))
        .with_panel(graph("Goodput per running cell", "bps",
                          query(f"ccsweep_cell_goodput_bits_per_second{{{CELLS}}}",
                                "{{algorithm}} loss {{loss}} rtt {{rtt}} ({{cell}})"), span=24,
                          description="Receiver goodput of all flows of each cell, per second of flow time; "
                                      "click a line for that cell's detail.").data_links(to_cell))
        .with_row(dashboard.Row("Results"))
        .with_panel(
            barchart.Panel().title("Goodput vs loss per algorithm and path (finished cells)").unit("bps")
            .description("Mean goodput of the finished cells at each loss rate (over repetitions and queues), "
                         "one bar per algorithm, RTT, bandwidth and experiment, so that points of different "
                         "paths never share a bar; narrow them with the Experiment, RTT and Bandwidth variables. "
                         "Fills in as cells finish.")
            .datasource(DATASOURCE).height(10).span(24).x_field("loss")
            .with_target(instant_table(GOODPUT_VS_LOSS))
            .with_transformation(DataTransformerConfig(id_val="groupingToMatrix", options={
                "rowField": "loss", "columnField": "series", "valueField": "Value"}))
            .with_transformation(DataTransformerConfig(id_val="sortBy", options={"sort": [{"field": "loss"}]})))
    )


def cell_detail() -> dashboard.Dashboard:
    builder = variables(base("ccsweep / Cell detail", UID_CELL,
                             "Every time series of one cell: TCP state per flow and the emulated link."),
                        with_cell=True)
    return (
        where_variables(builder)
        .links([link("Sweep overview", f"/d/{UID_OVERVIEW}?var-sweep=$sweep&{PASSED_ON}"),
                link("All sweeps", f"/d/{UID_SWEEPS}?{PASSED_ON}")])
        .with_row(dashboard.Row("Cell"))
        .with_panel(big_number("Flow time done", "percentunit", f"cell:ccsweep_cell_progress:ratio{{{CELL}}}", span=6))
        .with_panel(big_number("Result goodput", "bps", f"ccsweep_cell_result_goodput_bits_per_second{{{CELL}}}",
                               span=6))
        .with_panel(big_number("Flow time", "s", f"ccsweep_cell_duration_seconds{{{CELL}}}", span=6))
        .with_panel(big_number("Emulator ran late", "bool_yes_no", f"ccsweep_cell_result_late{{{CELL}}}", span=6,
                               red_above=1))
        .with_row(dashboard.Row("TCP"))
        .with_panel(graph("Goodput", "bps",
                          query(f"ccsweep_cell_goodput_bits_per_second{{{CELL}}}", "all flows", "A"),
                          query(f"ccsweep_cell_flow_goodput_bits_per_second{{{CELL}}}", FLOW_LEGEND, "B")))
        .with_panel(graph("RTT (smoothed)", "s", query(f"ccsweep_cell_rtt_seconds{{{CELL}}}", FLOW_LEGEND)))
        .with_panel(graph("Congestion window", "none", query(f"ccsweep_cell_cwnd_segments{{{CELL}}}", FLOW_LEGEND),
                          description="tcpi_snd_cwnd, in segments."))
        .with_panel(graph("Pacing and delivery rate", "bps",
                          query(f"ccsweep_cell_pacing_rate_bits_per_second{{{CELL}}}", "pacing " + FLOW_LEGEND, "A"),
                          query(f"ccsweep_cell_delivery_rate_bits_per_second{{{CELL}}}",
                                "delivery " + FLOW_LEGEND, "B")))
        .with_panel(graph("BBR bandwidth estimate", "bps",
                          query(f"ccsweep_cell_bbr_bandwidth_bits_per_second{{{CELL}}}", FLOW_LEGEND),
                          description="BBR's max-filtered delivery rate (TCP_CC_INFO); BBR flows only."))
        .with_panel(graph("Retransmits", "none", query(f"cell:ccsweep_cell_retransmits:rate10s{{{CELL}}}", FLOW_LEGEND),
                          description="Segments retransmitted per second (10 s rate of tcpi_total_retrans)."))
        .with_row(dashboard.Row("Emulated link (uplink)"))
        .with_panel(graph("Bottleneck queue", "decbytes", query(f"ccsweep_cell_queue_bytes{{{CELL}}}", "bytes"),
                          span=8))
        .with_panel(graph("Bottleneck queue (packets)", "none",
                          query(f"ccsweep_cell_queue_packets{{{CELL}}}", "packets"), span=8))
        .with_panel(graph("Drops by cause", "none", query(f"cell:ccsweep_cell_drops:rate10s{{{CELL}}}", "{{cause}}"),
                          span=8, description="Packets dropped per second: random loss, full queue, AQM."))
        .with_panel(graph("Emulator lateness (p99)", "s",
                          query(f"ccsweep_cell_emulator_lateness_p99_seconds{{{CELL}}}", "p99"), span=24,
                          description="How late the emulator released packets; a late cell's result is flagged."))
    )


def sweeps() -> dashboard.Dashboard:
    """Every sweep Prometheus knows, one row each; its links lead to the sweep's overview, its Argo
    workflows and its report."""
    builder = base("ccsweep / Sweeps", UID_SWEEPS,
                   "Every sweep with its progress and its failed and late cells; a sweep's name links to its "
                   "overview, its Argo workflows and its report.")
    builder = where_variables(builder.with_variable(
        dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus")))
    columns = {"A": "sweep:ccsweep_progress:ratio", "B": "sweep:ccsweep_cells:total", "C": "sweep:ccsweep_cells:failed",
               "D": "sweep:ccsweep_cells_late:count", "E": "sweep:ccsweep_eta:seconds"}
    panel = (table.Panel().title("Sweeps").datasource(DATASOURCE).height(12).span(24).show_header(True)
             .description("One row per sweep: progress, cells, failed and late cells, time left. Click a sweep's "
                          "name for its overview, its Argo workflows or its report.")
             .data_links(sweep_links("${__data.fields.sweep}")))
    for ref, expr in columns.items():
        panel = panel.with_target(instant_table(expr).ref_id(ref))
    return (builder.with_panel(
        panel.with_transformation(DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(DataTransformerConfig(id_val="organize", options={
            "excludeByName": {"Time": True},
            "renameByName": {"Value #A": "progress", "Value #B": "cells", "Value #C": "failed", "Value #D": "late",
                             "Value #E": "time left (s)"}}))))


DASHBOARDS: dict[str, Callable[[], dashboard.Dashboard]] = {
    "sweeps.json": sweeps,
    "sweep-overview.json": sweep_overview,
    "cell-detail.json": cell_detail,
}


def render(build: Callable[[], dashboard.Dashboard]) -> str:
    """The dashboard's JSON, panels numbered 1.. (Grafana needs ids unique within a dashboard)."""
    model = build().build()
    for number, panel in enumerate(model.panels or [], start=1):
        panel.id_val = number
    return json.dumps(json.loads(JSONEncoder().encode(model)), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, build in DASHBOARDS.items():
        path, text = HERE / name, render(build)
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    for name in stale:
        print(f"dashboards/{name} differs from the generator: run python dashboards/generate.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
