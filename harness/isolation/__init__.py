"""Driver isolation and child processes: the driver host a driver lives in (host, hostproto and
the harness-side proxy), the stress sandbox, the one child-process layer they share
(childproc), bounded calls (watchdog), interrupts and the reaper of leftover processes.
"""
