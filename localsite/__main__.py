"""python -m localsite: serve a deployed stack's requests on the local site (see docs/serving-locally.md).

python -m localsite run --kubeconfig K [--namespace rebel100] [--dir D] [--port 0] [--kubelet] [--time-scale F]
                        [--engine-start-delay S]
    start the site's programs for the namespace's Running pods and the gateway role; once the EPP behind the
    gateway listens, print the OpenAI base URL (http://127.0.0.1:PORT/v1) on a line of its own; run until
    SIGINT or SIGTERM, then stop everything it started, by pid. With --kubelet it is the namespace's kubelet too:
    probes decide each pod's Ready condition, a deleted pod gets its preStop hooks, SIGTERM and its grace period
python -m localsite stop [--dir D]
    stop the site serving from D (`make down`; it stops its programs as on Ctrl-C), then whatever a site recorded
    under D that still runs (a site killed with SIGKILL leaves its programs)
python -m localsite stack
    the stack whose render the EPP reads (its generation: pd-router07 for v0.7.x, prod-4p4d for v0.9+)
python -m localsite binaries
    where the programs the images map to are (REBEL100_EPP_BINARY and REBEL100_SIDECAR_BINARY, else the
    builds of scripts/consumers)
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
import signal
import sys

from host import signals
from localsite import binaries as site_binaries
from localsite import netns, procs

PROJECT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_DIR = PROJECT / ".cluster" / "default" / "serve"


def cmd_run(args: argparse.Namespace) -> int:
    from localsite.agent import Agent  # pyyaml and the API client only when a site runs

    found = site_binaries.find()
    folder = pathlib.Path(args.dir).resolve()
    stop = signals.StopSignals(signal.SIGINT, signal.SIGTERM)
    # Serving again from the same folder replaces the site there: one still serving, or what a killed one left.
    leftover = procs.stop_site(folder)
    if leftover:
        logging.warning("stopped what an earlier site left running: %s", ", ".join(leftover))
    procs.record_site(folder)
    listener = netns.listener_in(None, "127.0.0.1", args.port)
    host, port = listener.getsockname()
    agent = Agent(
        folder,
        args.kubeconfig,
        args.namespace,
        found.programs,
        found.gateway,
        listener,
        tuple(args.sim_arg),
        kubelet=args.kubelet,
        time_scale=args.time_scale,
        engine_start_delay=args.engine_start_delay,
    )
    announced = False

    def until() -> bool:
        """The base URL once requests can be served (the EPP listening behind the gateway), then run on."""
        nonlocal announced
        if not announced and agent.serving():
            print(f"http://{host}:{port}/v1", flush=True)
            announced = True
        return stop.is_set()

    try:
        agent.start()
        agent.run(until=until)
    finally:
        agent.close()
        listener.close()
        procs.forget_site(folder)
    return 0


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is below 0")
    return value


def cmd_stop(args: argparse.Namespace) -> int:
    for name in procs.stop_site(pathlib.Path(args.dir).resolve()):
        print(f"stopped {name}")
    return 0


def cmd_binaries(args: argparse.Namespace) -> int:
    found = site_binaries.find()
    for name, path in (
        ("sim", found.programs.sim),
        ("epp", found.programs.epp),
        ("sidecar", found.programs.sidecar),
        ("gateway", found.gateway),
    ):
        print(f"{name}\t{path}")
    return 0


def cmd_stack(args: argparse.Namespace) -> int:
    print(site_binaries.stack_for(site_binaries.program("epp")))
    return 0


def main(argv: list[str]) -> int:
    # The time of day on each line: where a stop or a start spent its time, read from the log alone.
    logging.basicConfig(
        level=logging.INFO, format="[localsite %(asctime)s] %(message)s", datefmt="%H:%M:%S", stream=sys.stderr
    )
    parser = argparse.ArgumentParser(prog="python -m localsite", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="serve the namespace's pods (foreground)")
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), required=not os.environ.get("KUBECONFIG"))
    p.add_argument("--namespace", default="rebel100")
    p.add_argument("--dir", default=str(DEFAULT_DIR), help="logs, pid files and status.json of the site")
    p.add_argument("--port", type=int, default=0, help="the gateway's port on 127.0.0.1 (0: a free one)")
    p.add_argument(
        "--sim-arg",
        action="append",
        default=[],
        help="an extra simulator flag for every engine (e.g. --sim-arg=--time-to-first-token=20)",
    )
    p.add_argument(
        "--kubelet",
        action="store_true",
        help=(
            "be the namespace's kubelet: probes decide Ready, deletion runs preStop, SIGTERM and the grace period "
            "(the cluster started with `scripts/cluster start --kubelet-namespace NS`, so kwok leaves that to the site)"
        ),
    )
    p.add_argument(
        "--time-scale",
        type=positive_float,
        default=1.0,
        help="multiply probe timings, preStop sleeps and grace periods by this (tests: below 1; default 1)",
    )
    p.add_argument(
        "--engine-start-delay",
        type=non_negative_float,
        default=0.0,
        help="seconds an engine's program starts after its container, standing for compilation (default 0; a pod's "
        "rebel100.local/ready-delay annotation overrides it)",
    )
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("stop", help="stop what a site left running")
    p.add_argument("--dir", default=str(DEFAULT_DIR))
    p.set_defaults(func=cmd_stop)
    p = sub.add_parser("stack", help="the stack whose render the router programs read")
    p.set_defaults(func=cmd_stack)
    p = sub.add_parser("binaries", help="the local programs the images map to")
    p.set_defaults(func=cmd_binaries)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (site_binaries.Missing, netns.NetnsError) as err:
        logging.error("%s", err)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
