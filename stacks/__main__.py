"""The command line: `python -m stacks render|plan|check|validate` offline, `preflight|placement` against a cluster.

  render STACK --out DIR            write one YAML file per Kubernetes object the program would apply
  plan STACK [--json]               print devices, KV and the RDS memory budget
  check STACK | --manifests DIR     config gate + render + policy pack (see policy/); --format text|json|sarif
  validate PATH...                  strict schema check of rendered YAML (Kubernetes and the CRDs in crds/)
  preflight STACK [--kubeconfig K]  will every engine pod fit the cluster's nodes and devices, and can the live
                                    stack's retained volumes take the change? (before `up`)
  placement STACK [--kubeconfig K]  where the engine pods run, and their devices with NUMA nodes (after `up`)
  watch STACK --pid P [--grace S]   beside `pulumi up`: cancel it when a pod stays unschedulable for S seconds
                                    (or the API server does not answer for --unreachable-grace seconds)
  secrets STACK                     may this stack's secrets be written? (a prod stack: not under the built-in
                                    passphrase)
  policy-config STACK               the pack's enforcement file for the stack's environment (prod when unset)
  checkpoint STACK [--restore]      does the stack's checkpoint (file backend) load? If not: its last good copy and the
                                    command that restores it; --restore puts that copy back (exit 1: damaged, none left)
  preview STACK [FLAGS...]          the PR check: `pulumi preview` with the pack at the stack's level, through Pulumi's
                                    Automation API (stacks/deploy/; FLAGS go to the CLI); what scripts/preview runs
  up [STACK] [--local-cluster] [--restore-checkpoint]
                                    deploy: preflight, a preview (refresh, pack), the update when it proposes a change
                                    (beside the watch), outputs and placement; Automation API, what scripts/up runs

STACK names `Pulumi.STACK.yaml` in the project; `--config-file FILE` reads any stack file instead.
Exit status: 0 fine, 1 invalid configuration, a mandatory policy violation or a pod that fits no node,
2 usage error or an unreadable cluster.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from core import stackfile


def _stack_path(args) -> tuple[pathlib.Path, str]:
    if args.config_file:
        path = pathlib.Path(args.config_file)
        name = args.stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    else:
        if not args.stack:
            raise SystemExit("a STACK name or --config-file is required")
        path, name = stackfile.stack_file(args.stack), args.stack
    if not path.exists():
        known = ", ".join(stackfile.available_stacks())
        print(f"error: {path} does not exist (stacks: {known})", file=sys.stderr)
        raise SystemExit(2)
    return path, name


def load_stack(args):
    """(path, name, config) of the stack the arguments name; config is None, with the problems
    printed, when the stack file is malformed or the configuration invalid."""
    from core.gate import ConfigError

    path, name = _stack_path(args)
    try:
        return path, name, stackfile.load_stack(path, name)
    except (ConfigError, stackfile.StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return path, name, None


def cmd_render(args) -> int:
    from core.gate import ConfigError
    from stacks import render

    path, name = _stack_path(args)
    try:
        result = render.render_stack_file(path, name)
    except (ConfigError, stackfile.StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    written = render.write(result.manifests, pathlib.Path(args.out))
    print(f"rendered {len(written)} objects of stack {name!r} to {args.out}")
    for key, value in result.outputs.items():
        print(f"  {key}: {json.dumps(value)}")
    return 0


def cmd_plan(args) -> int:
    from stacks.plan import format_plan, plan

    _, name, cfg = load_stack(args)
    if cfg is None:
        return 1
    data = plan(cfg)
    print(json.dumps(data, indent=2) if args.json else format_plan(name, data))
    return 0


def cmd_check(args) -> int:
    from stacks.check import run_check

    path_and_name = _stack_path(args) if (args.stack or args.config_file) and not args.manifests else None
    return run_check(args, path_and_name)


def cmd_preflight(args) -> int:
    """Refuse, before anything is applied, a stack whose engine pods cannot all be placed on the site, or a
    change its retained volumes cannot take (core/retained.py)."""
    from stacks.site import preflight

    _, name, cfg = load_stack(args)
    if cfg is None:
        return 1
    return preflight(name, cfg, args.kubeconfig)


def cmd_placement(args) -> int:
    """Each engine pod, its node and the devices (with NUMA node) its claim was allocated."""
    from stacks.site import SiteError, format_placement, placement

    _, _name, cfg = load_stack(args)
    if cfg is None:
        return 1
    try:
        print(format_placement(placement(cfg, args.kubeconfig)))
    except SiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def cmd_watch(args) -> int:
    from stacks.site import watch

    _, _, cfg = load_stack(args)
    if cfg is None:
        return 1
    return watch(
        cfg, args.kubeconfig, pid=args.pid, grace_seconds=args.grace, unreachable_seconds=args.unreachable_grace
    )


def cmd_secrets(args) -> int:
    """Refuse a prod stack whose secrets would sit under the project's built-in passphrase, or under none."""
    from host import stackenv

    path, name = _stack_path(args)
    try:
        config, _ = stackfile.read_config(path)
        refusal = stackenv.secrets_refusal(name, path, config)
    except stackfile.StackFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 1
    return 0


def cmd_policy_config(args) -> int:
    """The pack's enforcement file for the stack's `rebel100:environment` (prod when unset, as the schema says):
    what scripts/up and scripts/preview pass to `--policy-pack-config`, and `check` applies."""
    from host import stackenv

    path, _name = _stack_path(args)
    try:
        config, _ = stackfile.read_config(path)
    except stackfile.StackFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(stackenv.policy_config(config))
    return 0


def cmd_checkpoint(args) -> int:
    """Is the stack's checkpoint in the file backend damaged? Name its last good copy and the command that restores
    it; with --restore, put that copy back (stacks/checkpoint.py)."""
    from stacks import checkpoint

    return checkpoint.command(args.stack, restore=args.restore, restore_command=args.restore_command)


def cmd_preview(args) -> int:
    """The PR check, on Pulumi's Automation API (stacks/deploy/, which imports the Pulumi SDK: only when it runs)."""
    from stacks.deploy.preview import preview

    return preview(args.stack, args.flags)


def cmd_up(args) -> int:
    """The deploy, on Pulumi's Automation API (stacks/deploy/, which imports the Pulumi SDK: only when it runs)."""
    from stacks.deploy.up import up

    return up(args.stack, args.local_cluster, args.restore_checkpoint)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m stacks", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    for name, helptext in (
        ("render", "render the Kubernetes objects offline"),
        ("plan", "print the capacity and memory plan"),
        ("check", "run the config gate and the policy pack"),
        ("preflight", "check, against a cluster, that every engine pod can be placed"),
        ("placement", "print where the engine pods run and their devices"),
        ("watch", "beside `pulumi up`: cancel it when a pod of the stack stays unschedulable"),
        ("secrets", "refuse a prod stack whose secrets would use the built-in passphrase"),
        ("policy-config", "print the policy pack's enforcement file for the stack's environment"),
    ):
        cmd = sub.add_parser(name, help=helptext)
        cmd.add_argument("stack", nargs="?", help="stack name (Pulumi.STACK.yaml)")
        cmd.add_argument("--config-file", help="read this stack file instead of Pulumi.STACK.yaml")
        if name == "render":
            cmd.add_argument("--out", required=True, help="folder to (re)write")
        if name == "plan":
            cmd.add_argument("--json", action="store_true", help="machine-readable output")
        if name in ("preflight", "placement", "watch"):
            cmd.add_argument("--kubeconfig", help="kubeconfig of the cluster (default: kubectl's)")
        if name == "watch":
            cmd.add_argument("--pid", type=int, required=True, help="process id of the running `pulumi up`")
            cmd.add_argument(
                "--grace", type=float, default=120.0, help="seconds a pod may stay unschedulable (default 120)"
            )
            cmd.add_argument(
                "--unreachable-grace",
                type=float,
                default=60.0,
                help="seconds the API server may not answer before the update is cancelled (default 60)",
            )
        if name == "check":
            cmd.add_argument("--manifests", help="check this folder of Kubernetes YAML instead of a stack's render")
            cmd.add_argument(
                "--environment", choices=["dev", "prod"], help="policy enforcement level for --manifests (default prod)"
            )
            cmd.add_argument("--json", action="store_true", help="machine-readable output")
            cmd.add_argument(
                "--format",
                choices=["text", "json", "sarif"],
                help="output format (--json is --format json; sarif: SARIF 2.1.0 for code scanning)",
            )
    restore = sub.add_parser("checkpoint", help="does the stack's checkpoint load? its last good copy, and --restore")
    restore.add_argument("stack", help="stack name")
    restore.add_argument("--restore", action="store_true", help="put the last good copy in place of a damaged one")
    restore.add_argument(
        "--restore-command", help="the command to name for restoring (default: scripts/up STACK --restore-checkpoint)"
    )
    preview = sub.add_parser(
        "preview",
        help="the PR check: `pulumi preview` with the pack at the stack's level (what scripts/preview runs)",
        usage="python -m stacks preview STACK [pulumi preview flags...]",
    )
    preview.add_argument("stack", help="stack name (Pulumi.STACK.yaml)")
    flags = preview.add_argument("flags", nargs=argparse.REMAINDER, help="flags of `pulumi preview`, passed on to it")
    flags.required = False  # argparse makes every REMAINDER positional required
    up = sub.add_parser(
        "up",
        help="deploy: preflight, a preview (refresh, pack), the update when it proposes a change, outputs and "
        "placement (what scripts/up runs)",
        description="Deploy one stack with the policy pack: preflight, a preview with the refresh and the pack, the "
        "update when the preview proposes a change (beside the watch), then the outputs and where each engine pod "
        "landed. Render-mode stacks: the update alone, their render folder kept in step (docs/deploying.md).",
    )
    up.add_argument("stack", nargs="?", default="dev", help="stack name (Pulumi.STACK.yaml; default dev)")
    up.add_argument(
        "--local-cluster",
        action="store_true",
        help="deploy to the local control plane (scripts/cluster), started if it is not running",
    )
    up.add_argument(
        "--restore-checkpoint",
        action="store_true",
        help="put the last good copy of a checkpoint Pulumi cannot load back first, then deploy (docs/recovery.md)",
    )
    from stacks import validate

    validate.add_arguments(
        sub.add_parser("validate", help="strictly validate rendered manifests (Kubernetes schemas, crds/)")
    )
    return top


def cmd_validate(args) -> int:
    from stacks.validate import run

    return run(args)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    commands = {
        "render": cmd_render,
        "plan": cmd_plan,
        "check": cmd_check,
        "validate": cmd_validate,
        "preflight": cmd_preflight,
        "placement": cmd_placement,
        "watch": cmd_watch,
        "secrets": cmd_secrets,
        "policy-config": cmd_policy_config,
        "preview": cmd_preview,
        "up": cmd_up,
        "checkpoint": cmd_checkpoint,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
