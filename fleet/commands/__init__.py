"""The `gpu-fleet` subcommands, one module each (`status`, `select`, `wait`, `estimate`, `report`, `export`):
flags and output, exposing `HELP`, `add_arguments` and `run` (fleet/cli.py). None imports another: what two
commands share lives in the packages below (`placing`, `sizing`, `reporting`, `querying`)."""
