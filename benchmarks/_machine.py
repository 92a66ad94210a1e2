"""What the benchmark scripts print about the machine they ran on."""

from __future__ import annotations


def cpu_model(default: str = "unknown CPU") -> str:
    """The CPU's model name from /proc/cpuinfo, or ``default`` where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return default
