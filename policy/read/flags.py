"""Reading the command lines of containers: vLLM's boolean flags (from its parser data) and aliases, a container's
command line and its `vllm serve` argv (the parsing itself, argparse's and Go's way: core/cmdline.py).
"""

from __future__ import annotations

import shlex

from core.versions import vllm_args

# --- command lines -------------------------------------------------------------------------

# vLLM flags that take no value: needed so that `--enable-prefix-caching MODEL` reads MODEL as the
# positional model, not as the flag's value. Those of the vLLM the target image builds on come from its committed
# parser data (core/versions/vllm_args.py); older releases' flags a foreign manifest may still pass are added here.
# Unknown bare flags are recognised by what follows them.
VLLM_RETIRED_BOOLEAN_FLAGS = frozenset({"--disable-log-requests", "--api-server-count-auto"})
VLLM_BOOLEAN_FLAGS = vllm_args.boolean_flags() | VLLM_RETIRED_BOOLEAN_FLAGS
# vLLM's short aliases.
VLLM_ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-dpr": "--data-parallel-rank",
    "-ep": "--enable-expert-parallel",
    "-q": "--quantization",
}


def command_line(container: dict) -> list[str]:
    """command + args; a shell form (`sh -c "vllm serve ..."`) is split into words."""
    words = [str(w) for w in (container.get("command") or [])] + [str(w) for w in (container.get("args") or [])]
    expanded: list[str] = []
    for word in words:
        if " " in word and ("vllm serve" in word or "vllm\tserve" in word):
            try:
                expanded.extend(shlex.split(word))
                continue
            except ValueError:
                pass
        expanded.append(word)
    return expanded


VLLM_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def serve_argv(container: dict) -> list[str] | None:
    """The arguments after `vllm serve` (or `python -m vllm.entrypoints.openai.api_server`, which takes the same
    arguments), or None when the container runs neither. An engine started by its image's entrypoint (args
    only) is not recognised: what the entrypoint runs is not in the manifest."""
    words = command_line(container)
    for index in range(len(words) - 1):
        if (words[index] == "vllm" or words[index].endswith("/vllm")) and words[index + 1] == "serve":
            return words[index + 2 :]
        if words[index] == "-m" and words[index + 1] == VLLM_API_SERVER_MODULE:
            return words[index + 2 :]
    return None
