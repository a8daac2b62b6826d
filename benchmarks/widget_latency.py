"""Time every explorer of every lesson as a learner feels it: set a control, recompute, redraw,
encode the PNG and send it to the page.

    python benchmarks/widget_latency.py                     # table on stdout
    python benchmarks/widget_latency.py --pinned --out benchmarks/widget_latency.md --page docs/measurements.md

Explorers are discovered, not listed: every public `al.<topic>.*_explorer` factory (arguments from
its `example_arguments()` when it needs some, see `accumlab.explorer.explorer_example`), and every
`al.<topic>.*_explorer(` a lesson calls must be one of them. Every control is moved across its
range (all options of a menu, up to `--points` evenly spaced values of a slider, a switch both
ways, then back to where it started); each interaction is timed from `control.value = v` until
the explorer has sent its new PNG. Two floors are measured in the same run: a plain two-panel line
figure built anew and encoded as a static cell shows it (the floor of a PNG round trip, which the
targets use), and the same figure updated through the explorer pipeline (the live floor). The
measurements run in a real IPython kernel (jupyter_client), so that the bytes really travel
through a widget comm; `--pinned` repeats the run under `taskset -c 0` (one core). Load averages
are recorded next to every figure: the machine may be shared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKERS = ("<!-- widgets:start -->", "<!-- widgets:end -->")
FLOOR_MOVES = 30


# --- in the kernel -------------------------------------------------------------------------------


def discover() -> list[tuple[str, object]]:
    """[(label, factory)] for every public explorer factory of every topic."""
    import inspect

    import accumlab as al

    found = []
    for topic in al.TOPICS:
        module = getattr(al, topic)
        for name in module.__all__:
            if name.endswith("_explorer") and not name.startswith(("plot_", "update_")):
                factory = getattr(module, name)
                if inspect.isfunction(factory):
                    found.append((f"{topic}.{name}", factory))
    return found


def lessons_calling(notebooks: Path = ROOT / "notebooks") -> dict[str, list[str]]:
    """{"topic.name": ["05", ...]} for every `al.<topic>.<name>(` call in the lessons."""
    calls: dict[str, list[str]] = {}
    for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        for topic, name in set(re.findall(r"\bal\.(\w+)\.(\w+)\(", code)):
            calls.setdefault(f"{topic}.{name}", []).append(path.name[:2])
    return calls


def sweep(control, points: int) -> list:
    """The values a learner can give `control`, across its range, then its starting value."""
    start = control.value
    if isinstance(start, bool):
        return [not start, start]
    if hasattr(control, "options"):
        values = [o[1] if isinstance(o, tuple) and len(o) == 2 else o for o in control.options]
    elif hasattr(control, "min") and hasattr(control, "max"):
        lo, hi = control.min, control.max
        values = [lo + (hi - lo) * i / (points - 1) for i in range(points)]
        if isinstance(start, int):
            values = [round(v) for v in values]
        else:
            step = getattr(control, "step", None) or (hi - lo) / (points - 1)
            values = [round(lo + round((v - lo) / step) * step, 10) for v in values]
    else:
        raise ValueError(f"do not know how to move a {type(control).__name__}")
    if len(values) > points:
        values = [values[round(i * (len(values) - 1) / (points - 1))] for i in range(points)]
    return [*dict.fromkeys(values), start]


def time_moves(explorer, points: int) -> list[dict]:
    """Move every control across its range; one record per interaction that changed a value,
    with the time spent computing and in full (generation 2) garbage collections."""
    import gc

    records = []
    compute = explorer.compute
    spent, collecting, started = [], [], [0.0]

    def timed(**values):  # the share of each interaction spent computing (not drawing)
        t = time.perf_counter()
        try:
            return compute(**values)
        finally:
            spent.append(time.perf_counter() - t)

    def full_collections(phase, info):
        if info["generation"] == 2:
            if phase == "start":
                started[0] = time.perf_counter()
            else:
                collecting.append(time.perf_counter() - started[0])

    explorer.compute = timed
    gc.callbacks.append(full_collections)
    try:
        for name, control in explorer.controls.items():
            for value in sweep(control, points):
                if value == control.value or (
                    hasattr(control, "max") and not control.min <= value <= control.max
                ):
                    continue  # already there, or out of a range another control narrowed
                spent.clear()
                collecting.clear()
                start = time.perf_counter()
                control.value = value
                seconds = time.perf_counter() - start
                if explorer.error is not None:
                    raise RuntimeError(f"{name} = {value!r}: {explorer.error}")
                records.append(
                    {
                        "control": name,
                        "value": repr(value),
                        "s": seconds,
                        "compute_s": sum(spent),
                        "gc_s": sum(collecting),
                    }
                )
    finally:
        explorer.compute = compute
        gc.callbacks.remove(full_collections)
    return records


def _floor_explorer():
    """A plain two-panel line figure as an explorer: the least any explorer can cost."""
    import ipywidgets as W
    import numpy as np
    from matplotlib.figure import Figure

    from accumlab.explorer import Explorer

    def compute(seed):
        rng = np.random.default_rng(seed)
        return rng.standard_normal((2, 50)).cumsum(axis=1)

    def plot(data):
        fig = Figure(figsize=(9, 3.4), layout="constrained")
        for ax, ys in zip(fig.subplots(1, 2), data, strict=True):
            ax.plot(ys, label="a line")
            ax.set(xlabel="step", ylabel="value", title="a panel")
        return fig

    def update(fig, data):
        for ax, ys in zip(fig.axes, data, strict=True):
            ax.lines[0].set_ydata(ys)
            ax.relim()
            ax.autoscale_view()

    seed = W.IntSlider(value=0, min=0, max=10**6)
    return Explorer({"seed": seed}, compute, plot, update), plot, compute


def time_floor(moves: int = FLOOR_MOVES) -> dict:
    import ipywidgets as W
    from IPython.display import Image, display

    from accumlab.figures import figure_png

    explorer, plot, compute = _floor_explorer()
    seed = explorer.controls["seed"]
    live, static, image, output = [], [], [], []
    out = W.Output()
    for i in range(1, moves + 1):
        t = time.perf_counter()
        seed.value = i
        live.append(time.perf_counter() - t)
        t = time.perf_counter()
        figure_png(plot(compute(i)))  # a new figure, as a static cell shows it
        static.append(time.perf_counter() - t)
        png = bytes(explorer.image.value)
        t = time.perf_counter()
        explorer.image.value = png[:-1] + bytes([i % 256])  # new bytes: a real comm message
        image.append(time.perf_counter() - t)
        t = time.perf_counter()
        with out:
            out.clear_output(wait=True)
            display(Image(data=png))
        output.append(time.perf_counter() - t)
    return {"live": live, "static": static, "show_image": image, "show_output": output}


def measure(points: int, only: str = "") -> dict:
    import accumlab as al

    env = al.setup()
    import torch

    from accumlab.explorer import Explorer

    # the first torch.optim optimizer of a process imports torch._dynamo (about 1 s here): a
    # one-time cost paid by whichever cell first builds one (in lesson 05, cells long before its
    # explorer), not by the explorer that happens to be timed first
    torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1)

    calls = lessons_calling()
    found = discover()
    known = {label for label, _ in found}
    missed = sorted(c for c in calls if c.endswith("_explorer") and c not in known)
    if missed:
        raise RuntimeError(f"lessons call explorers the benchmark cannot find: {missed}")
    result = {
        "machine": machine(),
        "env": str(env),
        "load": [os.getloadavg()],
        "floor": time_floor(),
        "explorers": [],
    }
    for label, factory in found:
        if only not in label:
            continue
        example = getattr(factory, "example_arguments", None)
        kwargs = example() if example else {}
        start = time.perf_counter()
        explorer = factory(**kwargs)
        build = time.perf_counter() - start
        if not isinstance(explorer, Explorer):
            raise RuntimeError(f"{label} returned {type(explorer).__name__}, not an Explorer")
        moves = time_moves(explorer, points)
        start = time.perf_counter()
        factory(**kwargs)  # again: what a re-run of the lesson's cell costs, once warm
        again = time.perf_counter() - start
        print(f"{label}: built in {build * 1e3:.0f} ms, {len(moves)} moves", file=sys.stderr)
        result["explorers"].append(
            {
                "label": label,
                "lessons": calls.get(label, []),
                "controls": len(explorer.controls),
                "updates": explorer.update is not None,
                "build_s": build,
                "again_s": again,
                "moves": moves,
            }
        )
        result["load"].append(os.getloadavg())
    return result


def machine() -> str:
    import torch

    return (
        f"{platform.machine()}, {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable by "
        f"the kernel), Python {platform.python_version()}, torch {torch.__version__} with "
        f"{torch.get_num_threads()} intra-op thread(s)"
    )


# --- outside the kernel --------------------------------------------------------------------------


def run_in_kernel(points: int, timeout: float, only: str = "") -> dict:
    from jupyter_client.manager import KernelManager

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(ROOT), env=env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    chunks = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            if msg["content"]["name"] == "stdout":
                chunks.append(msg["content"]["text"])
            else:
                sys.stderr.write(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            sys.stderr.write("\n".join(msg["content"]["traceback"]) + "\n")

    path = str(Path(__file__).resolve())
    code = (
        f"import json; __ns = {{'__name__': 'widget_latency', '__file__': {path!r}}}\n"
        f"exec(compile(open({path!r}).read(), {path!r}, 'exec'), __ns)\n"
        f"print('@@' + json.dumps(__ns['measure']({points}, {only!r})))"
    )
    try:
        reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    if reply["content"]["status"] != "ok":
        raise SystemExit("the measurement failed in the kernel (traceback above)")
    return json.loads("".join(chunks).split("@@", 1)[1])


def _ms(values) -> str:
    return f"{values * 1e3:.0f}"


TARGET_P90_S, TARGET_RATIO, TARGET_MAX_S, TARGET_BUILD_S = 0.150, 2.5, 0.300, 0.300


def _stats(seconds) -> tuple[float, float, float]:
    seconds = sorted(seconds)
    p90 = seconds[min(len(seconds) - 1, round(0.9 * (len(seconds) - 1)))]
    return statistics.median(seconds), p90, seconds[-1]


def table(run: dict, title: str) -> list[str]:
    f, loads = run["floor"], run["load"]
    static, live = statistics.median(f["static"]), statistics.median(f["live"])
    lines = [
        f"**{title}** — {run['machine']}; load average (1 min) {loads[0][0]:.2f} at the start, "
        f"{max(load[0] for load in loads):.2f} at most, {loads[-1][0]:.2f} at the end.",
        "",
        "| explorer | lesson | figure | moves | build, again (ms) | median (ms) | p90 (ms) "
        "| max (ms) | p90 ÷ floor | p90 ÷ live floor | compute, median (ms) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[str, list[float]] = {"updated": [], "rebuilt": []}
    for e in run["explorers"]:
        seconds = [m["s"] for m in e["moves"]]
        groups["updated" if e["updates"] else "rebuilt"] += seconds
        med, p90, worst = _stats(seconds)
        compute = statistics.median([m["compute_s"] for m in e["moves"]])
        lines.append(
            f"| `al.{e['label']}` | {', '.join(e['lessons']) or '—'} | "
            f"{'updated' if e['updates'] else 'rebuilt'} | {len(seconds)} | "
            f"{_ms(e['build_s'])}, {_ms(e['again_s'])} | {_ms(med)} | {_ms(p90)} | {_ms(worst)} | "
            f"{p90 / static:.1f} | {p90 / live:.1f} | {_ms(compute)} |"
        )
    everything = groups["updated"] + groups["rebuilt"]
    for name, seconds in (("all", everything), *groups.items()):
        if seconds and (name == "all" or len(seconds) < len(everything)):
            med, p90, worst = _stats(seconds)
            what = "" if name == "all" else f" of explorers whose figure is {name}"
            lines.append(
                f"| **all {len(seconds)} interactions{what}** | | | | | **{_ms(med)}** | "
                f"**{_ms(p90)}** | **{_ms(worst)}** | **{p90 / static:.1f}** | "
                f"**{p90 / live:.1f}** | |"
            )
    lines += [
        f"| floor: plain two-panel line figure built anew + `figure_png` (a static cell) | | "
        f"rebuilt | {len(f['static'])} | | {_ms(static)} | | | 1.0 | | |",
        f"| live floor: the same figure updated through the explorer pipeline | | updated | "
        f"{len(f['live'])} | | {_ms(live)} | | | | 1.0 | |",
        "",
    ]
    med, p90, worst = _stats(everything)
    builds = [e["build_s"] for e in run["explorers"]]
    slow = [e["label"] for e in run["explorers"] if e["build_s"] > TARGET_BUILD_S]
    over = sum(s > TARGET_MAX_S for s in everything)
    late = [(e["label"], m) for e in run["explorers"] for m in e["moves"] if m["s"] > TARGET_MAX_S]
    with_gc = [m for _, m in late if m.get("gc_s", 0) > 0.05]
    where = ", ".join(
        f"{label.split('.')[0]} ×{n}" for label, n in Counter(name for name, _ in late).items()
    )
    lines += [
        f"Targets: p90 {_ms(p90)} ms (≤ {_ms(TARGET_P90_S)}: {_mark(p90 <= TARGET_P90_S)}), "
        f"{p90 / static:.1f}× the floor (≤ {TARGET_RATIO}: {_mark(p90 <= TARGET_RATIO * static)}), "
        f"{over} interaction(s) over {_ms(TARGET_MAX_S)} ms ({_mark(over == 0)}), "
        f"longest build {_ms(max(builds))} ms (≤ {_ms(TARGET_BUILD_S)}: {_mark(not slow)}"
        + (f"; over: {', '.join(slow)}" if slow else "")
        + ").",
        f"Interactions over {_ms(TARGET_MAX_S)} ms: {where or 'none'}; {len(with_gc)} of them "
        f"included a full garbage collection of more than 50 ms"
        + (f" ({', '.join(_ms(m['gc_s']) for m in with_gc)} ms)." if with_gc else "."),
        "",
        f"Showing the same PNG, kernel side (median of {len(f['show_image'])}): `Image.value = png` "
        f"{statistics.median(f['show_image']) * 1e3:.2f} ms; `Output.clear_output` + `display` "
        f"{statistics.median(f['show_output']) * 1e3:.2f} ms.",
    ]
    return lines


def _mark(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=9, help="values per slider (default 9)")
    parser.add_argument("--pinned", action="store_true", help="also run under `taskset -c 0`")
    parser.add_argument("--json", type=Path, help="write the raw timings here")
    parser.add_argument("--out", type=Path, help="write the Markdown tables here")
    parser.add_argument("--page", type=Path, help="replace the table between the markers")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--only", default="", help="only explorers whose name contains this")
    parser.add_argument(
        "--in-process", action="store_true", help="measure here, not in a kernel (no comm)"
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # internal
    args = parser.parse_args(argv)
    if args.in_process:
        run = measure(args.points, args.only)
    else:
        run = run_in_kernel(args.points, args.timeout, args.only)
    if args.one:  # the pinned child: hand the run to the parent
        print("@@" + json.dumps(run))
        return 0
    runs = {"all cores": run}
    if args.pinned:
        if not shutil.which("taskset"):
            raise SystemExit("--pinned needs taskset (util-linux)")
        cmd = [sys.executable, __file__, "--one", f"--points={args.points}", f"--only={args.only}"]
        cmd = ["taskset", "-c", "0", *cmd, *(["--in-process"] if args.in_process else [])]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        sys.stderr.write(proc.stderr)
        if proc.returncode:
            raise SystemExit(f"the pinned run failed ({proc.returncode})")
        runs["pinned to one core (`taskset -c 0`)"] = json.loads(proc.stdout.split("@@", 1)[1])
    command = "python benchmarks/widget_latency.py" + (" --pinned" if args.pinned else "")
    lines = [f"Measured {dt.date.today().isoformat()} with `{command}`.", ""]
    for title, r in runs.items():
        lines += [*table(r, title), ""]
    text = "\n".join(lines)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    if args.out:
        args.out.write_text(text)
    if args.page:
        page = args.page.read_text()
        start, end = MARKERS
        if start not in page or end not in page:
            raise SystemExit(f"{args.page} has no {start} ... {end} markers")
        head, rest = page.split(start, 1)
        args.page.write_text(f"{head}{start}\n{text}{end}{rest.split(end, 1)[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
