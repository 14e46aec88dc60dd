"""``python -m recoup.fleet``: the Ray backend of ``recoup population --ray``.

Reads ``{"address": ..., "jobs": [{"toml", "name", "policy", "seed"}, ...]}`` as JSON on stdin
(each job one stream's scenario text, a policy label and the stream's seed), runs every job as
a Ray task through the package's Ray sweep backend, and prints the result rows as a JSON list in
job order. Each stream's scenario text carries absolute trace paths, so no base folder is needed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from recoup import _sweep_ray


def run_jobs(jobs: list[dict[str, Any]], address: str | None) -> list[dict[str, Any]]:
    """One row per job, in order."""
    args = [(j["toml"], None, 0, j["policy"], j["seed"], None, j["name"]) for j in jobs]
    return _sweep_ray(args, address)


def main() -> None:
    request = json.load(sys.stdin)
    out = sys.stdout
    # stdout carries only the rows: anything Ray or a worker prints goes to stderr.
    sys.stdout = sys.stderr
    try:
        rows = run_jobs(request["jobs"], request.get("address"))
    finally:
        sys.stdout = out
    json.dump(rows, out)


if __name__ == "__main__":
    main()
