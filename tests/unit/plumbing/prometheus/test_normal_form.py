"""`normal_form`: two spellings of one PromQL question have one form (what names a capacity pool), and two
different questions never share one."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plumbing.prometheus.syntax import MAX_QUERY_NESTING, normal_form

FREE = 'sum(kube_node_status_allocatable{resource="nvidia_com_gpu", pool="a100"})'


@pytest.mark.parametrize(("one", "other"), [
    ("sum(free_gpus)", "sum ( free_gpus )"),
    ("sum(free_gpus)", "sum(\n  free_gpus  # every node\n)"),
    ("sum(free_gpus)", "sum by () (free_gpus)"),
    ("sum(free_gpus)", "sum(free_gpus) by ()"),
    ("max(free_gpus)", "max by ()(free_gpus)"),
    ("a - b", "a - ignoring () b"),
    ('free{pool="a", zone="z"}', "free{zone='z',pool=\"a\"}"),
    ("sum(rate(x[5m]))", "sum(rate(x[300s]))"),
    ("1000 - used", "1e3 - used"),
    ("sum(free_gpus)", "(sum(free_gpus))"),
    ("sum(free_gpus)", "((  sum(free_gpus) ))"),
    (FREE, FREE.replace(", ", ",")),
], ids=["spaces", "lines-and-comment", "empty-by-before", "empty-by-after", "empty-by-max", "empty-ignoring",
        "matcher-order-and-quotes", "duration-unit", "number-notation", "outer-parentheses",
        "outer-parentheses-twice", "recorded-rule-spacing"])
def test_spellings_of_one_query_have_one_form(one: str, other: str) -> None:
    assert normal_form(one) is not None
    assert normal_form(one) == normal_form(other)


@pytest.mark.parametrize(("one", "other"), [
    ('free{pool="a100"}', 'free{pool="h100"}'),
    ('free{pool="a100"}', 'free{pool=~"a100"}'),
    ('free{pool="a100"}', 'free{pool!="a100"}'),
    ('free{pool="a100"}', 'free{pool="a100", zone="z"}'),
    ("sum(free)", "max(free)"),
    ("rate(x[5m])", "irate(x[5m])"),
    ("rate(x[5m])", "rate(x[6m])"),
    ("free", "free offset 5m"),
    ("sum(free)", "sum by (pool) (free)"),
    ("sum(free)", "sum without () (free)"),
    ("a - b", "a - on () b"),
    ("a - b", "a - ignoring (pool) b"),
    ("a / (b + c)", "a / b + c"),
    ("a - b", "b - a"),
    ("a > 1", "a > bool 1"),
    ("free", "free_gpus"),
    ("a * on (x) group_left y", "a * on (x) group_right y"),
    ("a * on (x) group_left (z) y", "a * on (x) group_left y"),
    ("free @ start()", "free @ end()"),
    ("free offset 5m", "free offset -5m"),
    ("max_over_time(free[5m:1m])", "max_over_time(free[5m:])"),
    ("topk(3, free)", "topk(4, free)"),
    ('free{pool="a100"}', 'free{pool="a100", pool="h100"}'),
], ids=["label-value", "regex-match", "negative-match", "more-matchers", "aggregation", "function",
        "range", "offset", "by-label", "empty-without", "empty-on", "ignoring-label", "inner-parentheses",
        "operands", "bool", "metric-name", "group-side", "group-labels", "at-modifier", "offset-sign",
        "subquery-step", "parameter", "repeated-label"])
def test_different_queries_have_different_forms(one: str, other: str) -> None:
    assert None not in (normal_form(one), normal_form(other))
    assert normal_form(one) != normal_form(other)


DEEP = "(" * (MAX_QUERY_NESTING + 1) + "1" + ")" * (MAX_QUERY_NESTING + 1)


@pytest.mark.parametrize("query", ["sum(free", "rate(free)", "free{", DEEP],
                         ids=["unclosed", "type", "brace", "deep"])
def test_a_query_that_does_not_parse_or_is_past_the_bounds_has_no_form(query: str) -> None:
    assert normal_form(query) is None


TOKENS = ["sum", "by", "(", ")", "(", "kube_gpus_free", "{", "pool", "=", '"a100"', ",", "zone", "!=", '"z"',
          "}", ")", "-", "2"]
SEPARATORS = st.sampled_from([" ", "  ", "\n", "\t", " # a comment\n", "\n\n  "])


@settings(max_examples=200, deadline=None)
@given(st.lists(SEPARATORS, min_size=len(TOKENS) - 1, max_size=len(TOKENS) - 1))
def test_whitespace_and_comments_anywhere_leave_the_form(separators: list[str]) -> None:
    spelt = TOKENS[0] + "".join(sep + token for sep, token in zip(separators, TOKENS[1:], strict=True))
    assert normal_form(spelt) == normal_form('sum(kube_gpus_free{pool="a100",zone!="z"}) - 2')


LABEL_VALUES = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(LABEL_VALUES, LABEL_VALUES)
def test_label_values_have_the_same_form_only_when_equal(one: str, other: str) -> None:
    """Written as JSON strings are (quotes, backslashes and control characters escaped as Go, and so PromQL,
    reads them)."""
    quoted = [json.dumps(value, ensure_ascii=False) for value in (one, other)]
    forms = [normal_form(f"sum(free{{pool={value}}})") for value in quoted]
    assert None not in forms
    assert (forms[0] == forms[1]) == (one == other)
