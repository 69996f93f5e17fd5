"""The failed-attempt limit per client address, against a model: generated sequences of failures, successes
and clock moves over a few addresses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from plumbing.web.guard import AuthLimits, FailureLimiter
from tests.clock import ManualClock

LIMITS = AuthLimits(failures=3, window_seconds=10.0, max_clients=4)
CLIENTS = ["10.0.0.1", "10.0.0.2", "::1", ""]

Step = tuple[str, str, float]  # (action, client, seconds to advance first)
steps = st.lists(st.tuples(st.sampled_from(["fail", "ok", "ask"]), st.sampled_from(CLIENTS),
                           st.floats(min_value=0, max_value=8, allow_nan=False)), max_size=60)


def model_retry_after(failures: list[float], now: float) -> int | None:
    """Blocked while the last `failures` failures all lie within the window; whole seconds, at least 1."""
    recent = failures[-LIMITS.failures:]
    if len(recent) < LIMITS.failures or recent[0] + LIMITS.window_seconds <= now:
        return None
    wait = recent[0] + LIMITS.window_seconds - now
    return max(1, -int(-wait // 1))


@settings(max_examples=300, deadline=None)
@given(steps)
def test_a_client_is_blocked_exactly_while_its_last_failures_fit_in_the_window(sequence: list[Step]) -> None:
    clock = ManualClock(1000.0)
    limiter = FailureLimiter(AuthLimits(failures=3, window_seconds=10.0, max_clients=len(CLIENTS)), clock)
    history: dict[str, list[float]] = {client: [] for client in CLIENTS}
    for action, client, advance in sequence:
        clock.advance(advance)
        if action == "fail":
            blocks = limiter.failed(client)
            before = model_retry_after(history[client], clock.now)
            history[client].append(clock.now)
            assert blocks == (before is None and model_retry_after(history[client], clock.now) is not None)
        elif action == "ok":
            limiter.forget(client)
            history[client] = []
        for other in CLIENTS:  # one client's attempts never change another's answer
            assert limiter.retry_after(other) == model_retry_after(history[other], clock.now), other


def test_the_fifth_failure_blocks_for_the_rest_of_the_window_and_only_that_client() -> None:
    clock = ManualClock(0.0)
    limiter = FailureLimiter(AuthLimits(failures=5, window_seconds=10.0), clock)
    for second in range(4):
        assert not limiter.failed("a")
        clock.now = float(second + 1)
    assert limiter.retry_after("a") is None
    assert limiter.failed("a")  # the fifth, at t=4: blocked until the first (t=0) leaves the window
    assert limiter.retry_after("a") == 6 and limiter.retry_after("b") is None
    clock.now = 9.5
    assert limiter.retry_after("a") == 1
    clock.now = 10.0
    assert limiter.retry_after("a") is None


def test_memory_holds_at_most_max_clients_addresses() -> None:
    clock = ManualClock(0.0)
    limiter = FailureLimiter(AuthLimits(failures=1, window_seconds=60.0, max_clients=100), clock)
    for n in range(10_000):
        limiter.failed(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
    assert len(limiter._failures) == 100
    assert limiter.retry_after("10.0.39.15") is not None  # the most recent are the ones kept
    assert limiter.retry_after("10.0.0.0") is None
