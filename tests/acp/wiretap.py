#!/usr/bin/env python3
"""Runs a command between the caller's stdio and its own, copying every line both ways unchanged
and appending each one to a log as it passes: `{"dir": "in"|"out", "line": <text>}` per line.

    wiretap.py LOG -- COMMAND [ARGS...]

tests/it/acp.rs puts it in front of `tandem acp` so that tests/acp/validate.py can check every
message tandem sent (and, to know which method a response answers, every message it received)
against the official ACP JSON schema. When the caller closes our stdin the command's stdin is
closed; when the command exits we exit with its status. Lines are copied as bytes; the log
decodes them leniently (a line that is not UTF-8 is logged with replacement characters).
"""

import json
import os
import signal
import subprocess
import sys
import threading


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print("usage: wiretap.py LOG -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    log_path, command = sys.argv[1], sys.argv[3:]
    log = open(log_path, "a", encoding="utf-8")
    lock = threading.Lock()

    def record(direction: str, line: bytes) -> None:
        entry = {"dir": direction, "line": line.rstrip(b"\r\n").decode("utf-8", "replace")}
        with lock:
            log.write(json.dumps(entry) + "\n")
            log.flush()

    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    # Forward a termination to the command, so a caller that kills us does not orphan it.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))

    def pump_in() -> None:
        stdin = sys.stdin.buffer
        try:
            while True:
                line = stdin.readline()
                if not line:
                    break
                record("in", line)
                child.stdin.write(line)
                child.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                child.stdin.close()
            except OSError:
                pass

    threading.Thread(target=pump_in, daemon=True).start()
    stdout = sys.stdout.buffer
    for line in iter(child.stdout.readline, b""):
        record("out", line)
        try:
            stdout.write(line)
            stdout.flush()
        except (BrokenPipeError, OSError):
            pass
    status = child.wait()
    log.close()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    # os._exit: the stdin pump may still block on a read of a caller that keeps our stdin open,
    # and a daemon thread blocked in a read can stall interpreter shutdown.
    code = main()
    sys.stdout.flush()
    os._exit(code)
