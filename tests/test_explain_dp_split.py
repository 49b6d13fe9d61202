"""explain shows the data-parallel traffic's time split into exposed and hidden (the "dp comm 0.000 beside a GB
of traffic" of issue 47): the exposed part never exceeds the traffic's time on the link, all of it is exposed
when nothing overlaps it, and the table prints both."""

from __future__ import annotations

import pytest

import pplan
from tests.cli_run import run_pplan

ONE_RANK = {"model": "llama3-8b", "gpus": 64, "global_batch": 256, "tp": 1, "pp": 1}


@pytest.mark.parametrize(
    "settings",
    [ONE_RANK, {**ONE_RANK, "zero_stage": 3}, {"model": "llama3-70b", "gpus": 256, "global_batch": 512}],
)
def test_exposed_is_at_most_the_traffic(settings: dict[str, object]) -> None:
    report = pplan.explain(**settings)
    assert report.performance is not None
    exposed = report.performance.breakdown_s["dp_comm"]
    assert report.communication.dp_sync_s > 0 and 0 <= exposed <= report.communication.dp_sync_s + 1e-12


def test_without_overlap_all_of_it_is_exposed() -> None:
    report = pplan.explain(**ONE_RANK, overlap_grad_reduce=False)  # one rank: it ends the step
    assert report.performance is not None
    assert report.performance.breakdown_s["dp_comm"] == pytest.approx(report.communication.dp_sync_s)


def test_the_table_prints_the_split(capsys: pytest.CaptureFixture[str]) -> None:
    report = pplan.explain(**ONE_RANK)
    assert report.performance is not None
    sync, exposed = report.communication.dp_sync_s, report.performance.breakdown_s["dp_comm"]
    args = [f"--{k.replace('_', '-')}={v}" for k, v in ONE_RANK.items()]
    out = " ".join(run_pplan(capsys, "explain", *args).out.split())
    assert (
        f"{sync:.3f} s on the link: {exposed:.3f} s exposed (dp comm), {sync - exposed:.3f} s hidden" in out
    )
