"""A real cell with Gilbert-Elliott loss on ccsweep-link loses what its model says it should.

The spec's friendly form (2 % loss in bursts of 3 packets on average) goes through expansion, the
cell, the runner's argv and the emulator's parser to the loss stage; the emulator's own counters
then give the share of bottleneck departures it dropped (loss after the bottleneck). BBR keeps the
link busy despite the loss, so some 30,000 packets pass in 8 s.
"""

from __future__ import annotations

import math

SPEC = {"name": "ge", "experiments": [{
    "name": "ge", "cc": ["bbr"], "gilbert_elliott": [{"mean_loss_percent": 2, "mean_burst_packets": 3}],
    "rtt_ms": [20], "bandwidth_mbps": [50], "duration_s": 8, "warmup_s": 2, "seed": 3}]}


def test_a_cell_with_bursty_loss_drops_its_configured_mean(cells):
    (cell,) = cells.of(SPEC)
    model = cell.params.uplink.gilbert_elliott
    assert model is not None and cell.params.loss == 0.02
    run = cells.run(cell)
    assert run.returncode == 0 and run.result is not None and run.result.link is not None, run.describe()
    up, down = run.result.link.uplink, run.result.link.downlink
    passed, lost = up.bottleneck_packets, up.drops_loss
    assert passed > 10_000, run.describe()
    # The loss count of a two-state chain over n packets has variance n pi (1 - pi) (1 + l) / (1 - l),
    # l = 1 - p - r the chain's memory: 4.9 times a Bernoulli's at these settings.
    memory = 1 - model.p - model.r
    sd = math.sqrt(0.02 * 0.98 * (1 + memory) / (1 - memory) / passed)
    assert abs(lost / passed - 0.02) < 3 * sd, f"{lost} of {passed} lost; {run.describe()}"
    assert down.drops_loss == 0, "loss_direction uplink leaves the ACKs alone"
