"""HTTP serving shared by the exporter and the controller: one aiohttp server (server.py), the
exporter-toolkit web config (webconfig.py), TLS with certificate reload (tls.py), basic auth (auth.py).

The server's names load aiohttp (0.15 s) on first use, not on `import plumbing.web`: a command that only
reads a web config, or stops at a bad flag, never pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plumbing.web.webconfig import WebConfig, WebConfigError, load_web_config

if TYPE_CHECKING:
    from plumbing.web.server import (
        ALLOW,
        ALLOWED_METHODS,
        PLAIN,
        Answer,
        HttpServer,
        ListenError,
        Request,
        Route,
        ServerSettings,
    )

_SERVER_NAMES = frozenset({"ALLOW", "ALLOWED_METHODS", "PLAIN", "Answer", "HttpServer", "ListenError",
                           "Request", "Route", "ServerSettings"})

__all__ = ["ALLOW", "ALLOWED_METHODS", "PLAIN", "Answer", "HttpServer", "ListenError", "Request", "Route",
           "ServerSettings", "WebConfig", "WebConfigError", "load_web_config"]


def __getattr__(name: str) -> Any:
    if name in _SERVER_NAMES:
        from plumbing.web import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
