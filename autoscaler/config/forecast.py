"""`forecast` of a rules file: the season, the lead, how many seasons back, and whether it acts."""

from __future__ import annotations

from typing import cast

from yaml.nodes import Node

from autoscaler.policy.spec import Forecast, ForecastMode
from plumbing.yamlnodes import NodeReader, line_of

__all__ = ["MAX_LOOKBACK_SECONDS", "parse_forecast"]

MIN_SEASON_SECONDS = 3_600
MAX_SEASON_SECONDS = 7 * 86_400
MAX_LOOKBACK_SECONDS = 7 * 86_400
"""lookbackSeasons x seasonSeconds: a week of minutes per metric is kept in memory (about 320 KB)."""
MAX_LEAD_SECONDS = 3_600
DEFAULT_LEAD_SECONDS = 120


def parse_forecast(reader: NodeReader, node: Node, where: str, startup_seconds: int | None,
                   ) -> Forecast | None:
    """`startup_seconds`: the rule's overloadBudget.startupSeconds, the lead when none is given."""
    fields = reader.mapping(node, where, {"seasonSeconds", "leadSeconds", "lookbackSeasons", "mode"})
    if fields is None:
        return None
    before = len(reader.problems)
    season = 86_400
    if "seasonSeconds" in fields:
        season = reader.integer(fields["seasonSeconds"], f"{where}.seasonSeconds", low=MIN_SEASON_SECONDS,
                                high=MAX_SEASON_SECONDS) or season
    lead = startup_seconds if startup_seconds else DEFAULT_LEAD_SECONDS
    if "leadSeconds" in fields:
        lead = reader.integer(fields["leadSeconds"], f"{where}.leadSeconds", low=60,
                              high=MAX_LEAD_SECONDS) or lead
    seasons = 1
    if "lookbackSeasons" in fields:
        seasons = reader.integer(fields["lookbackSeasons"], f"{where}.lookbackSeasons", low=1, high=7) or 1
    mode = "scaleUp"
    if "mode" in fields:
        mode = reader.choice(fields["mode"], f"{where}.mode", ("scaleUp", "observe")) or mode
    if seasons * season > MAX_LOOKBACK_SECONDS:
        reader.problem(line_of(node), f"{where}.lookbackSeasons",
                       f"lookbackSeasons x seasonSeconds is {seasons * season}s (at most "
                       f"{MAX_LOOKBACK_SECONDS}s, a week)")
    if 2 * lead > season:
        reader.problem(line_of(node), f"{where}.leadSeconds",
                       f"expected at most half of seasonSeconds ({season}s) (got {lead}s)")
    if len(reader.problems) > before:
        return None
    return Forecast(season_seconds=season, lead_seconds=lead, lookback_seasons=seasons,
                    mode=cast(ForecastMode, mode))
