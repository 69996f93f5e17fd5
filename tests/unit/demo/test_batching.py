"""The emulated continuous-batching server follows its measured profile: a batch of B decodes at B / step(B)
tokens a second, a prompt prefills in the profile's time, the KV cache preempts (and recomputes) past its
size, and every request is served to its last token."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demo.batching import BatchingReplica, Request, least_in_flight
from demo.serving_profile import DEFAULT_PROFILE, ProfileError, load_profile

PROFILE = load_profile()
MEASURED = json.loads(DEFAULT_PROFILE.read_text(encoding="utf-8"))


@pytest.mark.parametrize("row", [r for r in MEASURED["decode"] if r["context_tokens"] == 512],
                         ids=lambda r: f"batch{r['batch']}")
def test_a_batch_of_b_decodes_at_b_over_the_profiles_step_time(row: dict[str, float]) -> None:
    """B requests whose context stays within 512 tokens: once all are prefilled they decode in lock-step,
    one token each per step of the profile's measured time at that batch."""
    batch, output = int(row["batch"]), 200
    replica = BatchingReplica(PROFILE)
    requests = [Request(0.0, 256, output) for _ in range(batch)]
    for request in requests:
        replica.submit(request)
    replica.advance(1_000.0)
    decoding_from = max(r.first_token or 0.0 for r in requests)
    done = max(r.finished or 0.0 for r in requests)
    tokens_per_second = batch * (output - 1) / (done - decoding_from)
    assert tokens_per_second == pytest.approx(batch / row["step_seconds"], rel=1e-9)


def test_one_512_token_prompt_prefills_in_the_profiles_time() -> None:
    measured = next(r["seconds"] for r in MEASURED["prefill"] if r["prompt_tokens"] == 512)
    replica = BatchingReplica(PROFILE)
    request = Request(0.0, 512, 1)
    replica.submit(request)
    replica.advance(10.0)
    assert request.ttft == pytest.approx(measured, rel=1e-9)
    assert request.finished == request.first_token  # one output token: the prefill's


def test_past_its_kv_cache_the_newest_request_is_preempted_and_recomputed() -> None:
    small = dataclasses.replace(PROFILE, kv_cache_tokens=4_096)
    replica = BatchingReplica(small)
    requests = [Request(0.0, 900, 500) for _ in range(4)]  # 4 x 901 fit, 4 x 1,400 do not
    for request in requests:
        replica.submit(request)
    replica.advance(0.05)
    assert len(replica.running) == 4
    replica.advance(1_000.0)
    assert replica.preemptions >= 1 and requests[-1].preemptions >= 1 and requests[0].preemptions == 0
    assert all(r.finished is not None for r in requests) and replica.kv_tokens == 0
    assert requests[-1].finished > requests[0].finished  # type: ignore[operator]


arrivals = st.lists(st.tuples(st.floats(min_value=0, max_value=5, allow_nan=False),
                              st.integers(min_value=1, max_value=1_500),
                              st.integers(min_value=1, max_value=300)), min_size=1, max_size=40)


@settings(max_examples=100, deadline=None)
@given(arrivals, st.integers(min_value=1_600, max_value=20_000), st.integers(min_value=1, max_value=16))
def test_every_request_is_served_to_its_last_token_within_the_kv_cache(
        gaps: list[tuple[float, int, int]], kv_tokens: int, max_num_seqs: int) -> None:
    profile = dataclasses.replace(PROFILE, kv_cache_tokens=kv_tokens, max_num_seqs=max_num_seqs)
    finished: list[Request] = []
    replica = BatchingReplica(profile, on_finish=finished.append)
    t = 0.0
    submitted = []
    for gap, prompt, output in gaps:
        t += gap
        replica.advance(t)
        assert replica.kv_tokens <= kv_tokens and len(replica.running) <= max_num_seqs
        request = Request(t, prompt, output)
        replica.submit(request)
        submitted.append(request)
    replica.advance(t + 10_000.0)
    fastest_prefill = min(row.seconds for row in PROFILE.prefill)  # measured: not monotonic in the tokens
    assert sorted(map(id, finished)) == sorted(map(id, submitted)) and replica.kv_tokens == 0
    for request in submitted:
        assert request.refused == (request.prompt_tokens + request.output_tokens > kv_tokens)
        if request.refused:  # one the cache can never hold: refused at once, never served
            assert request.ttft is None and request.finished is not None
            continue
        assert request.ttft is not None and request.ttft >= fastest_prefill
        assert request.mean_itl is not None and request.mean_itl >= 0.0
        assert request.generated == request.output_tokens


def test_a_profile_with_a_bad_field_is_refused_naming_the_file_and_the_field(tmp_path: Path) -> None:
    broken = dict(MEASURED, decode=[dict(MEASURED["decode"][0], step_seconds=-1)])
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(ProfileError) as raised:
        load_profile(path)
    message = str(raised.value)
    assert str(path) in message and "decode" in message and "step_seconds" in message


def test_between_measured_points_the_step_time_is_interpolated() -> None:
    """Halfway between batch 64 and 128 at 512 tokens, and halfway between 512 and 2048 tokens at batch 16."""
    at = {(r["context_tokens"], r["batch"]): r["step_seconds"] for r in MEASURED["decode"]}
    assert PROFILE.step_seconds(96, 512) == pytest.approx((at[512, 64] + at[512, 128]) / 2)
    assert PROFILE.step_seconds(16, 1_280) == pytest.approx((at[512, 16] + at[2048, 16]) / 2)


def test_the_router_counts_what_each_replica_has_in_flight_now_not_when_it_last_ran() -> None:
    """A's two short requests are done by t=1, B's long one is not: A is the idler one then, though A last
    ran at 0 with two in flight."""
    a, b = BatchingReplica(PROFILE), BatchingReplica(PROFILE)
    for _ in range(2):
        a.submit(Request(0.0, 128, 1))
    b.submit(Request(0.0, 128, 4_000))
    assert (a.in_flight, b.in_flight) == (2, 1)
    assert least_in_flight([a, b], 1.0) is a
    assert (a.in_flight, b.in_flight) == (0, 1)
