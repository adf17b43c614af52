"""Real cells behind CoDel with ECN on ccsweep-link: the queue marks what it would drop, and the
kernel's TCP sees the marks.

The spec's `tcp_ecn: on` goes to both endpoints' namespaces and `queue.ecn` through expansion, the
cell, the runner's argv and the emulator's parser to the queue. CUBIC over 20 Mbit/s and 20 ms,
behind CoDel at two BDPs, keeps a standing queue that CoDel signals on within a second or two. With
`ecn` the signals are CE marks: the emulator counts them, the sender reads them back
(tcpi_delivered_ce), and CoDel drops nothing; without it the same signals are drops.
"""

from __future__ import annotations

SPEC = {"name": "ecn", "experiments": [{
    "name": "ecn", "cc": ["cubic"], "loss_percent": [0], "tcp_ecn": "on",
    "queue": [{"kind": "codel", "bdp": 2}, {"kind": "codel", "bdp": 2, "ecn": True}],
    "rtt_ms": [20], "bandwidth_mbps": [20], "duration_s": 8, "warmup_s": 2}]}


def test_codel_marks_an_ecn_flow_where_it_would_drop_and_the_sender_sees_the_marks(cells):
    dropping, marking = cells.of(SPEC)
    assert (dropping.params.tcp_ecn, dropping.params.uplink.queue.ecn, marking.params.uplink.queue.ecn) == (
        "on", False, True)
    runs = [cells.run(cell) for cell in (dropping, marking)]
    for run in runs:
        assert run.returncode == 0 and run.result is not None and run.result.link is not None, run.describe()
        assert run.result.environment.tcp_ecn == 1, "the endpoints' namespaces had tcp_ecn 1"
    dropped, marked = (run.result for run in runs)
    assert dropped is not None and marked is not None and dropped.link is not None and marked.link is not None
    assert dropped.link.uplink.drops_aqm > 0 and dropped.link.uplink.marks_aqm == 0, dropped.link.uplink
    assert marked.link.uplink.marks_aqm > 0 and marked.link.uplink.drops_aqm == 0, marked.link.uplink
    assert marked.link.uplink.marks_step == 0
    # The sender learnt of the marks (tcpi_delivered_ce counts the packets acknowledged by ACKs that
    # echo congestion; classic ECN's receiver echoes until the sender's CWR, so more than the marks).
    (flow,) = marked.flows
    assert flow.delivered_ce is not None and flow.delivered_ce >= marked.link.uplink.marks_aqm, flow
    assert dropped.flows[0].delivered_ce == 0
    # A mark slows CUBIC as a drop does, without the retransmission.
    assert marked.flows[0].retransmits < dropped.flows[0].retransmits
