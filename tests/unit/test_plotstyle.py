"""Readable log axes: plain numbers on major ticks only, never overlapping (the cost figure's
'2x10^3x10^-2' of overlapping minor labels)."""
import matplotlib
import pytest

from analysis.figures.plotstyle import readable_log_ticks, save

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.mark.parametrize("lo,hi", [(0.02, 0.09), (0.03, 0.045), (0.02, 0.6), (0.001, 500)])
def test_log_axes_get_plain_non_overlapping_labels(tmp_path, lo, hi):
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.scatter([lo, hi], [lo, hi])
    ax.set_xscale("log")
    ax.set_yscale("log")
    readable_log_ticks(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        labels = [t for t in axis.get_majorticklabels() + axis.get_minorticklabels()
                  if t.get_text() and lim[0] <= (t.get_position()[0] if axis is ax.xaxis
                                                 else t.get_position()[1]) <= lim[1]]
        assert len(labels) >= 2
        assert not any("times" in t.get_text() or "^" in t.get_text() for t in labels)
        boxes = [t.get_window_extent(renderer) for t in labels]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), [t.get_text() for t in labels]
    plt.close(fig)


def test_save_makes_log_axes_readable(tmp_path):
    from matplotlib import ticker
    fig, ax = plt.subplots()
    ax.plot([0.02, 0.09], [1, 2])
    ax.set_xscale("log")
    save(fig, tmp_path / "f.png")
    assert isinstance(ax.xaxis.get_major_formatter(), ticker.FuncFormatter)
    assert isinstance(ax.xaxis.get_minor_formatter(), ticker.NullFormatter)


def test_readable_log_ticks_keeps_explicit_ticks():
    fig, ax = plt.subplots()
    ax.plot([1, 1024], [1, 2])
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 4, 16, 64, 256, 1024])
    readable_log_ticks(fig)
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "16", "64", "256", "1024"]
    plt.close(fig)


def test_two_engines_are_two_series_each_against_its_own_one_node_rate():
    import pandas as pd

    from analysis.tables import speedup, tables
    from analysis.figures.plotstyle import series, style
    # steady samples/s: 1/t, so each engine's 2-node speedup is its 1-node time over its 2-node time
    runs = pd.DataFrame([dict(run_id=f"{e}{n}", status="ok", model="mlp", engine=e, strategy="allreduce", hosts=n,
                              bw_bps=1e7, bw="10mbit", training_time_s=t, time_per_step_s=t / 10, steady="ok",
                              steady_samples_per_s=1 / t, fixed="data", steps=10, global_batch=32 * n,
                              workers=n)
                         for e, times in (("tensorflow", (2.0, 3.0)), ("pytorch", (1.0, 4.0)))
                         for n, t in zip((1, 2), times)])
    runs = tables.with_steady_columns(tables.with_faithful_defaults(runs))
    summary = speedup.summary(runs)
    got = {(label, bw): list(rows["speedup"].round(2)) for label, bw, rows in series(summary)}
    assert got == {("allreduce (pytorch)", 1e7): [1.0, 0.25], ("allreduce (tensorflow)", 1e7): [1.0, 0.67]}
    assert style("allreduce (pytorch)") == ("o", ":") and style("allreduce") == ("o", "-")
    one = runs[runs["engine"] == "tensorflow"].drop(columns="engine")       # results before PyTorch
    assert [label for label, _, _ in series(speedup.summary(one))] == ["allreduce"]
