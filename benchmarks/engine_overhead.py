"""Does the accumlab engine slow training down? Times `al.run` against a hand-written accumulation
loop on the same model and data, interleaved, and prints the ratios of median and of minimum
times (target ≤ 1.05).

    python benchmarks/engine_overhead.py                  # CPU, and CUDA when present
    python benchmarks/engine_overhead.py --markdown benchmarks/engine_overhead.md
    python benchmarks/engine_overhead.py --threads 1   # steadier on a busy shared CPU

Both sides copy the model first (al.run does) and train it with SGD on identical micro-batches;
the script checks that they end with the same parameters before reporting any time.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import accumlab as al
from accumlab.memory.parts import memory_setup

LR = 0.01
SIZES = {  # (width, depth, global batch, micro-batch size, k)
    "cpu": (256, 4, 1024, 32, 4),
    "cuda": (1024, 4, 8192, 256, 4),
}


def hand_loop(model, data, micro_batch_size: int, k: int):
    """The loop a training script would have: nothing recorded, nothing copied per step."""
    model = copy.deepcopy(model)  # al.run trains a copy too
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    micro = data.micro_batches(micro_batch_size)
    for w in range(0, len(micro), k):
        window = micro[w : w + k]
        opt.zero_grad(set_to_none=True)
        for mb in window:
            loss = F.mse_loss(model(mb.x), mb.y)
            (loss / len(window)).backward()  # loss / k
        opt.step()
    return model


def engine(
    model, data, micro_batch_size: int, k: int, record_grads: bool, record_windows: bool = True
):
    recipe = al.Recipe(micro_batch_size, k)
    return al.run(
        recipe,
        model,
        data,
        loss="mse",
        optimizer="sgd",
        lr=LR,
        record_grads=record_grads,
        record_windows=record_windows,
    ).model


def timed(fn, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def bench(device: torch.device, repeats: int) -> dict:
    width, depth, n, mb, k = SIZES[device.type]
    model, data = memory_setup(width, depth, n, device=device)
    contenders = {
        "hand-written loop": lambda: hand_loop(model, data, mb, k),
        "al.run(record_windows=False)": lambda: engine(model, data, mb, k, False, False),
        "al.run (default)": lambda: engine(model, data, mb, k, False),
        "al.run(record_grads=True)": lambda: engine(model, data, mb, k, True),
    }
    ref = hand_loop(model, data, mb, k)
    for name, fn in contenders.items():  # same model, same data, same result: else no comparison
        out = fn()
        for (pn, a), b in zip(ref.named_parameters(), out.parameters(), strict=True):
            if not torch.allclose(a, b, rtol=1e-4, atol=1e-6):
                raise SystemExit(f"{name} ended with different {pn} than the hand-written loop")
    times = {name: [] for name in contenders}
    for _ in range(repeats):  # interleaved, so a busy moment on the machine hits every contender
        for name, fn in contenders.items():
            times[name].append(timed(fn, device))
    base = statistics.median(times["hand-written loop"])
    base_min = min(
        times["hand-written loop"]
    )  # the least-disturbed run: steadier on a busy machine
    rows = [
        {
            "name": name,
            "median_s": statistics.median(t),
            "min_s": min(t),
            "ratio": statistics.median(t) / base,
            "min_ratio": min(t) / base_min,
        }
        for name, t in times.items()
    ]
    return {
        "device": device,
        "config": f"MLP {depth}×{width} float32, {n} samples, micro-batch {mb}, k={k}, SGD, {repeats} interleaved repeats",
        "rows": rows,
    }


def where_time_goes(device: torch.device, runs: int = 5) -> str:
    """Share of al.run's time spent copying tensors into its Trace (cProfile, CPU only)."""
    import cProfile
    import pstats

    width, depth, n, mb, k = SIZES[device.type]
    model, data = memory_setup(width, depth, n, device=device)
    lines = [
        "| al.run | snapshot (all copies of .grad) | params_of (parameter copies) |",
        "|---|---|---|",
    ]
    for record_grads in (False, True):
        engine(model, data, mb, k, record_grads)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(runs):
            engine(model, data, mb, k, record_grads)
        prof.disable()
        stats = pstats.Stats(prof)
        share = {
            fn[2]: ct / stats.total_tt
            for fn, (_, _, _, ct, _) in stats.stats.items()
            if fn[0].endswith("engine.py")
        }
        lines.append(
            f"| record_grads={record_grads} | {share.get('snapshot', 0):.1%} | {share.get('params_of', 0):.1%} |"
        )
    return "\n".join(lines)


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"


def markdown(results: list[dict], command: str) -> str:
    lines = [
        "# Engine overhead: `al.run` vs a hand-written accumulation loop",
        "",
        f"Command: `{command}`  ",
        f"Date: {datetime.date.today().isoformat()}, torch {torch.__version__}, Python {platform.python_version()}",
        f"Load average when it finished (1/5/15 min): {' / '.join(f'{x:.1f}' for x in os.getloadavg())}",
        "",
    ]
    for r in results:
        lines += [
            f"## {r['device'].type.upper()}: {machine(r['device'])}",
            "",
            r["config"],
            "",
            "| loop | median s/run | min s/run | ratio of medians | ratio of minima |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {row['name']} | {row['median_s']:.4f} | {row['min_s']:.4f} | {row['ratio']:.3f} | {row['min_ratio']:.3f} |"
            for row in r["rows"]
        ]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--device", choices=["all", "cpu", "cuda"], default="all")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    parser.add_argument(
        "--profile", action="store_true", help="also show where al.run's extra time goes"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    devices = [torch.device("cpu")] if args.device in ("all", "cpu") else []
    if args.device in ("all", "cuda"):
        if torch.cuda.is_available():
            devices.append(torch.device("cuda"))
        elif args.device == "cuda":
            parser.error("--device cuda: no CUDA device found")
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be >= 1, got {args.threads}")
        # one thread: on a shared machine, threads waiting for a busy core swamp what is measured
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results = [bench(d, args.repeats) for d in devices]
    text = markdown(
        results,
        "python benchmarks/engine_overhead.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
    )
    if args.profile:
        text += "\n## Where al.run's extra time goes (cProfile, share of al.run's time)\n\n"
        text += where_time_goes(torch.device("cpu")) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
