"""HTTP serving shared by the exporter and the controller: one aiohttp server (server.py), the
exporter-toolkit web config (webconfig.py), TLS with certificate reload (tls.py), basic auth (auth.py).

The package exports the web config only; the server's names come from `plumbing.web.server`, so a command
that only reads a web config, or stops at a bad flag, never imports aiohttp (0.15 s).
"""

from plumbing.web.webconfig import WebConfig, WebConfigError, load_web_config

__all__ = ["WebConfig", "WebConfigError", "load_web_config"]
