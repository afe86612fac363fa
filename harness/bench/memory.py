"""Resident memory of a driver host, read from /proc (Linux).

The kernel keeps each process's peak resident set (``VmHWM``) and lets its owner reset it to
the current resident set by writing ``5`` to ``/proc/PID/clear_refs``.  So the peak of one
phase (prepare, steady execution) is: reset, run the phase, read ``VmHWM``.  Where the reset
is refused (an old kernel, another user's process) the peak is the one since the host
started, and the figures say so (``peak_since_start``).
"""

from __future__ import annotations

from dataclasses import dataclass


def _status(pid: int) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    key, val = line.split(":", 1)
                    out[key] = int(val.split()[0]) * 1024  # the kernel says kB
    except (OSError, ValueError):
        return {}
    return out


@dataclass
class PeakMeter:
    """The peak resident memory of one process, phase by phase."""

    pid: int | None
    peak_since_start: bool = False

    def reset(self) -> None:
        if self.pid is None:
            return
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
        except OSError:
            self.peak_since_start = True  # the peaks read later include everything before

    def rss(self) -> int | None:
        return _status(self.pid).get("VmRSS") if self.pid is not None else None

    def peak(self) -> int | None:
        return _status(self.pid).get("VmHWM") if self.pid is not None else None


def host_pid(device) -> int | None:
    """The process id of an isolated device's current driver host (None in-process)."""
    host = getattr(device, "_current", None)
    return getattr(host, "pid", None)
