"""The fleet over a window, for `report` and `export`: the window and per-GPU timelines (`timeline`), the
range queries (`fetch`), the report's numbers (`usage`, pure), and its formats (`render_md`, `render_json`,
`render_html`)."""
