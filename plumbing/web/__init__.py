"""HTTP serving shared by the exporter and the controller: one aiohttp server (server.py), the
exporter-toolkit web config (webconfig.py), TLS with certificate reload (tls.py), basic auth (auth.py)."""

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
from plumbing.web.webconfig import WebConfig, WebConfigError, load_web_config

__all__ = ["ALLOW", "ALLOWED_METHODS", "PLAIN", "Answer", "HttpServer", "ListenError", "Request", "Route",
           "ServerSettings", "WebConfig", "WebConfigError", "load_web_config"]
