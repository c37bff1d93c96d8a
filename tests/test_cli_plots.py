"""The command line's main job and the plots (smoke: they run, write files, and report the run)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import flowlib as fl  # noqa: E402
from flowlib import examples, plots  # noqa: E402
from flowlib.cli import main  # noqa: E402


@pytest.mark.parametrize("example", sorted(examples.EXAMPLES))
def test_demo_writes_plot_and_result(example, tmp_path, capsys):
    assert main(["demo", "--example", example, "--t-end", "5", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "status success" in out and "kind" in out
    png = tmp_path / f"{example}.png"
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    res = fl.load(tmp_path / f"{example}.npz")
    assert res.status == "success" and res.t_final == 5.0


def test_info(capsys):
    assert main(["info"]) == 0
    assert "numba" in capsys.readouterr().out


def test_plot_functions_accept_an_axis():
    import matplotlib.pyplot as plt

    prob, p0 = examples.sliding_two_points(1e-3)
    res = fl.gradient_flow(prob, p0, 10.0)
    fig, (left, right) = plt.subplots(1, 2)
    assert plots.loss(res, ax=left) is fig
    assert plots.event_raster(res, ax=right) is fig
    assert len(right.collections) >= 1
    lines = left.get_lines()
    assert np.all(np.diff(lines[0].get_ydata()) <= 1e-15)  # the plotted loss decreases
    plt.close(fig)
