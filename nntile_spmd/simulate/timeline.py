"""Simulator: draw a prediction as a per-rank timeline (PNG via matplotlib)."""

from __future__ import annotations

from collections import Counter

SHOWN = 7      # the op types with the most time get a colour each; the rest share one


def draw_timeline(prediction, path, title="") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    time_by_kernel = Counter()
    for event in prediction.events:
        if event.kind == "exec":
            time_by_kernel[event.label] += event.end - event.start
    top = [name for name, _ in time_by_kernel.most_common(SHOWN)]
    palette = plt.get_cmap("tab10").colors
    colours = {name: palette[i] for i, name in enumerate(top)}
    colours["other ops"], colours["waiting for a tile"] = "0.6", "black"
    colours["sending, receiving"] = "0.85"

    bars = {}      # (rank, legend label) -> [(start_ms, width_ms)]
    for event in prediction.events:
        if event.kind == "send" or event.end <= event.start:
            continue
        label = ("waiting for a tile" if event.kind == "wait" else
                 "sending, receiving" if event.kind != "exec" else
                 event.label if event.label in colours else "other ops")
        bars.setdefault((event.rank, label), []).append(
            (event.start * 1e3, (event.end - event.start) * 1e3))
    on_path = {(prediction.events[i].rank, prediction.events[i].start)
               for i in prediction.critical_path}

    height = 0.8
    figure, axes = plt.subplots(figsize=(11, 1.2 + 0.5 * prediction.nranks))
    for (rank, label), spans in bars.items():
        axes.broken_barh(spans, (rank - height / 2, height), facecolors=colours[label],
                         label=label)
    path_starts = sorted(start for rank, start in on_path)
    if path_starts:
        ranks = [prediction.events[i].rank for i in prediction.critical_path]
        times = [prediction.events[i].start * 1e3 for i in prediction.critical_path]
        axes.plot(times, ranks, color="gold", linewidth=0.8, label="critical path")
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    axes.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left",
                bbox_to_anchor=(1.0, 1.0))
    axes.set_yticks(range(prediction.nranks))
    axes.set_yticklabels([f"rank {r}" for r in range(prediction.nranks)])
    axes.invert_yaxis()
    axes.set_xlabel("ms")
    axes.set_title(title or f"predicted step {prediction.step_s * 1e3:.1f} ms")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
