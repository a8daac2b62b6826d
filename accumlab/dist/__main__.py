"""`python -m accumlab.dist`: lesson 07's experiments from a shell (lesson 07).

Alone it launches --world-size processes itself. Under torchrun it is one rank of the job:

    torchrun --nproc_per_node=2 -m accumlab.dist            # one machine, 2 ranks
    torchrun --nnodes=2 --nproc_per_node=8 ... -m accumlab.dist   # real multi-node

Rank 0 prints all-reduce counts and bytes, FSDP2 collectives and gradient memory, step times and
the equivalence checks against one process; the exit status is 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path


def parse(argv=None):
    from .._validate import positive_int
    from .launcher import check_timeout, check_world_size
    from .lesson import PARTS, check_parts
    from .worker import under_torchrun

    p = argparse.ArgumentParser(prog="python -m accumlab.dist", description=__doc__.splitlines()[0])
    p.add_argument(
        "--world-size", type=int, default=2, help="ranks to launch (ignored under torchrun)"
    )
    p.add_argument("--k", type=int, default=4, help="micro-steps per optimizer step")
    p.add_argument("--micro-batch", type=int, default=8, help="samples per micro-batch per rank")
    p.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}"
    )
    p.add_argument("--device", choices=("auto", "cpu"), default="auto", help="cpu: ignore GPUs")
    p.add_argument(
        "--timeout", type=float, default=300.0, help="seconds before the launch is stopped"
    )
    p.add_argument("--json", type=Path, default=None, help="also write the summary to this file")
    args = p.parse_args(argv)
    try:
        args.parts = check_parts(x for x in args.parts.split(",") if x)
        for name in ("k", "micro_batch"):
            positive_int(name, getattr(args, name))
        if not under_torchrun():  # under torchrun, torchrun decides the world size
            check_world_size(args.world_size)
        check_timeout(args.timeout)
        if args.json is not None:
            # checked now, not after minutes of experiments
            folder = args.json.parent
            if not folder.is_dir():
                raise ValueError(f"--json {args.json}: the folder {folder} does not exist")
            if args.json.is_dir():
                raise ValueError(f"--json {args.json} is a folder; give a file name")
            if not os.access(folder, os.W_OK):
                raise ValueError(f"--json {args.json}: the folder {folder} is not writable")
    except ValueError as err:
        p.error(str(err))  # a usage message and exit status 2, not a traceback
    return args


def main(argv=None) -> int:
    args = parse(argv)
    # SIGTERM (kill, a job scheduler) normally ends Python without running `finally` blocks;
    # as SystemExit it lets the launcher stop its workers and remove its folder first
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    from .backend import choose_plan
    from .lesson import sync_experiments
    from .report import checks
    from .summary import summarise
    from .text import format_summary
    from .worker import run_here, under_torchrun

    parts = args.parts
    if under_torchrun():
        import os

        kwargs = {"k": args.k, "micro_batch": args.micro_batch, "parts": parts, "seed": 0}
        gathered = run_here(
            "accumlab.dist.lesson:lesson_task", kwargs, device=args.device, timeout=args.timeout
        )
        if gathered is None:
            return 0  # only rank 0 reports
        world = int(os.environ["WORLD_SIZE"])
        plan = choose_plan(
            world, device=args.device, ranks_per_node=int(os.environ.get("LOCAL_WORLD_SIZE", world))
        )
        summary = summarise(gathered, plan, k=args.k, micro_batch=args.micro_batch)
    else:
        summary = sync_experiments(
            args.world_size,
            k=args.k,
            micro_batch=args.micro_batch,
            parts=parts,
            timeout=args.timeout,
            device=args.device,
            progress=False,
        )
    print(format_summary(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0 if all(checks(summary).values()) else 1


if __name__ == "__main__":
    sys.exit(main())
