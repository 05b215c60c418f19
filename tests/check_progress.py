#!/usr/bin/env python3
"""The training samples' progress line (the C sample and its Go, Rust and
Java ports): run under a pseudo-terminal, the command must draw at least one
progress line ("epoch E/EP step S/N R samples/s M:SS left", redrawn in place
with carriage returns) and, read as a terminal shows it, print exactly the
lines it prints with stdout a pipe, final line included (timings aside);
with stdout a pipe it must print no carriage return and no progress.

    check_progress.py COMMAND [ARGS...]

Exits 0 when both runs held, 1 otherwise (with what differed).
"""
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

TIMEOUT_S = 240
PROGRESS = re.compile(r"^epoch \d+/\d+ step \d+/\d+ \d+(\.\d+)? samples/s \d+:\d\d left *$")
FINAL = re.compile(r"^final test_acc=[01]\.\d{4} train_loss=\d+\.\d{4} samples_per_s=\d+\.\d$")
# Timings differ from run to run.
TIMING = re.compile(r"samples_per_s=[0-9.]+")


def run_in_pty(argv):
    """The command's output (stdout and stderr) through a pseudo-terminal, and its exit status."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    out = bytearray()
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            sys.exit(f"check_progress: {argv[0]} did not finish within {TIMEOUT_S} s under a terminal")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return out.decode("utf-8", "replace"), os.waitstatus_to_exitcode(status)


def screen_lines(text):
    """The lines as a terminal leaves them, and every text drawn over by a carriage return."""
    text = text.replace("\r\n", "\n")  # the terminal's own newline translation
    lines, overdrawn = [], []
    for raw in text.split("\n"):
        pieces = raw.split("\r")
        overdrawn += [p for p in pieces[:-1] if p.strip()]
        lines.append(pieces[-1])
    if lines and lines[-1] == "":
        lines.pop()
    return lines, overdrawn


def main():
    argv = sys.argv[1:]
    if not argv:
        sys.exit(__doc__)
    failures = []

    tty_text, tty_rc = run_in_pty(argv)
    tty_lines, drawn = screen_lines(tty_text)
    if tty_rc != 0:
        failures.append(f"under a terminal it exited with {tty_rc}")
    if not drawn:
        failures.append("under a terminal no progress line was drawn")
    for p in drawn:
        if not PROGRESS.match(p):
            failures.append(f"under a terminal this was drawn over, but is no progress line: {p!r}")
    if any(PROGRESS.match(l) for l in tty_lines):
        failures.append("a progress line was left on the screen")

    piped = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
    pipe_text = piped.stdout.decode("utf-8", "replace")
    if piped.returncode != 0:
        failures.append(f"with stdout a pipe it exited with {piped.returncode}")
    if "\r" in pipe_text or re.search(r"step \d+/\d+ .*samples/s", pipe_text):
        failures.append("with stdout a pipe it printed a progress line")
    pipe_lines = pipe_text.splitlines()
    if not pipe_lines or not FINAL.match(pipe_lines[-1]):
        failures.append(f"its last line is not the final line: {pipe_lines[-1:]!r}")
    if [TIMING.sub("samples_per_s=T", l) for l in tty_lines] != [TIMING.sub("samples_per_s=T", l) for l in pipe_lines]:
        failures.append("the lines under a terminal differ from the lines with a pipe:\n  terminal: "
                        + "\n            ".join(tty_lines) + "\n  pipe:     " + "\n            ".join(pipe_lines))

    print(f"under a terminal: {len(drawn)} progress draws, e.g. {drawn[0]!r}" if drawn else "no progress drawn")
    print("\n".join(pipe_lines))
    if failures:
        print("check_progress: FAILED:\n- " + "\n- ".join(failures))
        return 1
    print("check_progress: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
