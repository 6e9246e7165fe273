"""host/processes.py: a process recorded by pid and start time, read back only while that very process runs, and
stopped by its record."""

from __future__ import annotations

import os
import sys
import time

from host import processes


def test_a_started_process_is_recorded_read_back_and_stopped(tmp_path):
    record, log = tmp_path / "sleeper.pid", tmp_path / "sleeper.log"
    started = processes.start_recorded(
        "sleeper",
        [sys.executable, "-c", "print('hi', flush=True); import time; time.sleep(60)"],
        log=log,
        record=record,
    )
    try:
        assert record.read_text() == f"{started.pid} {started.started}\n"
        assert started.started == processes.start_time(started.pid)
        found = processes.read_record(record, "sleeper")
        assert found is not None and (found.pid, found.started) == (started.pid, started.started)
        assert os.getsid(started.pid) == started.pid  # a session of its own
        deadline = time.monotonic() + 30
        while not log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.read_text() == "hi\n"  # its output, appended to its log
    finally:
        processes.terminate(started, timeout=5)
    assert not started.alive() and started.exit_code() is not None
    assert processes.read_record(record, "sleeper") is None  # gone: the record names nothing that runs
    gone = processes.record_of(record, "sleeper")
    assert gone is not None and gone.pid == started.pid and not gone.alive()


def test_a_record_that_cannot_be_read_names_nothing(tmp_path):
    (tmp_path / "bad.pid").write_text("not a record\n")
    assert processes.record_of(tmp_path / "bad.pid", "bad") is None
    assert processes.record_of(tmp_path / "missing.pid", "missing") is None
    mine = processes.Recorded("me", os.getpid(), processes.start_time(os.getpid()))
    assert mine.alive() and not processes.Recorded("me", os.getpid(), "0").alive()  # another start time: not me
