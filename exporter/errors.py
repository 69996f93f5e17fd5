"""The exporter's own exception hierarchy: NVML and OS errors are re-raised as these, chained with `from`."""

from __future__ import annotations


class ExporterError(Exception):
    """Base of every error the exporter raises on purpose."""


class NvmlUnavailableError(ExporterError):
    """NVML cannot be used at all: no library, no driver, or init failed. Retried in the background."""


class GpuReadError(ExporterError):
    """One GPU could not be read (lost, reset needed, unknown error); the others keep reporting."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(f"GPU {index}: {message}")
        self.index = index


class ConfigError(ExporterError):
    """A bad --simulate-config file or flag value; str() names the file and the field."""


class ServeError(ExporterError):
    """The HTTP server cannot start (port in use, bad address)."""


class NvmlEventError(ExporterError):
    """NVML's event API failed (event set creation, or a wait that did not merely time out)."""
