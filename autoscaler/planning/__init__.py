"""The controller's decision beyond the HPA arithmetic, as pure stages (`plan`: pause, schedules, fallback,
scale to zero, the capacity guard), and what replays it off-line: metric traces (`trace_csv`, `trace_replay`)
and candidate settings over a rule's history (`tuning`). No I/O: inputs are passed in."""
