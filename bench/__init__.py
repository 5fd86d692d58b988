"""GPU tools of the package: verification over the official workloads, timing and tuning."""
