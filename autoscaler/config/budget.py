"""`overloadBudget` of a rules file: the share of overloaded minutes a rule may have, its start-up time."""

from __future__ import annotations

from yaml.nodes import Node

from autoscaler.policy.spec import OverloadBudget
from plumbing.yamlnodes import NodeReader

__all__ = ["MAX_PERCENT_OF_MINUTES", "MAX_STARTUP_SECONDS", "parse_overload_budget"]

MAX_PERCENT_OF_MINUTES = 50.0
"""Overloaded half the time is no budget; a larger value is a typo."""
MAX_STARTUP_SECONDS = 3_600
"""An hour to load a model: longer is a typo (minutes for seconds)."""


def parse_overload_budget(reader: NodeReader, node: Node, where: str) -> OverloadBudget | None:
    fields = reader.mapping(node, where, {"percentOfMinutes", "startupSeconds"},
                            required=("percentOfMinutes", "startupSeconds"))
    if fields is None:
        return None
    percent = startup = None
    if "percentOfMinutes" in fields:
        percent = reader.number(fields["percentOfMinutes"], f"{where}.percentOfMinutes", above=0,
                                high=MAX_PERCENT_OF_MINUTES)
    if "startupSeconds" in fields:
        startup = reader.integer(fields["startupSeconds"], f"{where}.startupSeconds", low=0,
                                 high=MAX_STARTUP_SECONDS)
    if percent is None or startup is None:
        return None
    return OverloadBudget(percent_of_minutes=percent, startup_seconds=startup)
