"""How long evaluating the pack takes: `python -m stacks.timing [STACK] [--repeats N]`.

Renders the stack offline once, then times `catalog.evaluate` (every policy over every object, as
`python -m stacks check` and each Pulumi policy call run the rules) REPEATS times in this process
and prints the median, the fastest and the slowest run with the machine it ran on. Interpreter
start-up, imports and the render are not part of the figure; they are the same with or without the pack.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stack", nargs="?", default="prod-4p4d")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)

    from core.stackfile import stack_file
    from policy import catalog, levels
    from stacks.render import render_stack_file

    manifests = render_stack_file(stack_file(args.stack), args.stack).manifests
    config = catalog.load_config(levels.environment_config("prod"))
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        catalog.evaluate(manifests, config)
        times.append(1000 * (time.perf_counter() - started))
    print(
        f"{len(catalog.POLICIES)} policies over {len(manifests)} objects of {args.stack}, {args.repeats} runs: "
        f"median {statistics.median(times):.2f} ms, fastest {min(times):.2f} ms, slowest {max(times):.2f} ms"
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
