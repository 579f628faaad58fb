#!/usr/bin/env python3
"""thread_kill.py PID SIGNAL: sends SIGNAL (USR1, TERM, ...) to one thread of process PID other than
its main thread, one that does not block it (tgkill(2)), and prints that thread's id. A `kill PID`
lands on the main thread whenever that thread can take it; a signal meant for the whole process
also reaches the others (a busy main thread, one with a signal pending), and this makes that case
happen every time, so that run_tsan.sh sees the stop handler run beside the main thread.
Exits 1 when the process has no such thread."""
import ctypes
import os
import signal
import sys

pid, sig = int(sys.argv[1]), getattr(signal, "SIG" + sys.argv[2].removeprefix("SIG"))
for tid in sorted(int(t) for t in os.listdir("/proc/%d/task" % pid)):
    if tid == pid:
        continue
    try:
        with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
            blocked = next(int(l.split()[1], 16) for l in f if l.startswith("SigBlk:"))
    except (OSError, StopIteration):
        continue  # the thread ended meanwhile
    if blocked >> (int(sig) - 1) & 1:
        continue  # OpenBLAS's threads, started with the stop signals blocked
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, int(sig)) == 0:  # glibc 2.30 and later
        print(tid)
        sys.exit(0)
sys.exit(1)
