"""NVML: the only importer of pynvml (`adapter`), its call helpers and the frozen snapshots it produces."""
