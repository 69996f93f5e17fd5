"""Serving: the HTTP endpoints (`server`) and the JSON status API (`status_api`, `status_service`)."""
