"""The GPU's SM clock, power draw and clock-event (throttle) reasons while a measurement runs.

`nvidia-smi` samples them every `period_ms` in a child process (the measuring process starts no thread
of its own); `summary()` reduces the samples to what tells a slower kernel from a slower clock:

    with ClockLog(device) as log:
        ...  # the measurement
    log.summary()  # {"samples": 212, "sm_mhz": {"min": 1755, "median": 1980, "max": 1980},
                   #  "power_w": {...}, "reasons": ["SwPowerCap"]}

Where `nvidia-smi` is missing or refuses the query, the summary says so ({"error": ...}) and the
measurement stands without it.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile

import torch

QUERY = "clocks.sm,power.draw,clocks_event_reasons.active"
# The bits of clocks_event_reasons.active (NVML's nvmlClocksEventReason*); GpuIdle is left out: an idle
# spell between timed calls is not a slowdown.
REASONS = {
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
}


def _spread(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summarize(text: str) -> dict:
    """The samples of `nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits` (one line each:
    MHz, W, a hexadecimal bit mask) as their count, the spread of the clock and the power, and the
    names of the reasons any sample had set."""
    clocks, powers, mask = [], [], 0
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3:
            continue
        try:
            clock, power, reasons = float(fields[0]), float(fields[1]), int(fields[2], 16)
        except ValueError:  # "[N/A]" or a line of an error message
            continue
        clocks.append(clock)
        powers.append(power)
        mask |= reasons
    if not clocks:
        return {"error": "no samples: " + (text.strip().splitlines() or ["nvidia-smi printed nothing"])[0][:200]}
    return {"samples": len(clocks), "sm_mhz": _spread(clocks), "power_w": _spread(powers),
            "reasons": [name for bit, name in REASONS.items() if mask & bit]}


def _smi_id(device: torch.device) -> list[str]:
    """`-i` for the device's PCI address (nvidia-smi numbers GPUs its own way), or nothing where torch
    does not say it."""
    p = torch.cuda.get_device_properties(device)
    if not all(hasattr(p, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        return []
    return ["-i", f"{p.pci_domain_id:08X}:{p.pci_bus_id:02X}:{p.pci_device_id:02X}.0"]


class ClockLog:
    """Samples from entering the block to leaving it (see the module's docstring)."""

    def __init__(self, device: torch.device, period_ms: int = 20):
        self.device, self.period_ms = device, period_ms
        self._out, self._process, self._summary = None, None, None

    def __enter__(self) -> ClockLog:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            self._summary = {"error": "nvidia-smi not found"}
            return self
        self._out = tempfile.TemporaryFile(mode="w+")
        self._process = subprocess.Popen(
            [smi, *_smi_id(self.device), f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
             "-lms", str(self.period_ms)], stdout=self._out, stderr=subprocess.STDOUT, text=True)
        return self

    def __exit__(self, *exc) -> None:
        if self._process is None:
            return
        self._process.terminate()
        self._process.wait()
        self._out.seek(0)
        self._summary = summarize(self._out.read())
        self._out.close()

    def summary(self) -> dict:
        return self._summary if self._summary is not None else {"error": "not sampled"}
