"""Processes the tests interrupt start as a terminal would start them: SIGINT at its default.

A test run started in the background by a shell without job control (`cmd &` in a script, as CI runners and
`nohup` do) inherits SIGINT *ignored*, and an ignored signal stays ignored across exec: bash then cannot trap it
("signals ignored upon entry to the shell cannot be trapped"), and `sleep` does not die of it. A Ctrl-C test
would see an interrupt that never arrived. Pass `preexec_fn=default_sigint` to the Popen of such a process.
"""

from __future__ import annotations

import signal


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
