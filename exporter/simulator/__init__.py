"""The simulated NVML: the pynvml call surface (`nvml`) over a fleet (`config`, `mig`, `physics`)."""
