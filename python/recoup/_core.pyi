"""The simulator: scenarios as TOML text in, one dict per run out (DESIGN.md columns)."""

from typing import Any

def run_toml(
    text: str,
    base_dir: str | None = None,
    seeds: int | None = None,
    duration_s: float | None = None,
    name: str | None = None,
) -> list[dict[str, Any]]: ...
def plan_toml(
    text: str,
    base_dir: str | None = None,
    seeds: int | None = None,
    duration_s: float | None = None,
    name: str | None = None,
) -> list[tuple[int, str, str, int]]: ...
def run_one_toml(
    text: str,
    base_dir: str | None,
    point_index: int,
    policy_label: str,
    seed: int,
    duration_s: float | None = None,
    name: str | None = None,
) -> dict[str, Any]: ...
def sweep_axes_toml(
    text: str, base_dir: str | None = None, name: str | None = None
) -> list[tuple[str, list[tuple[str, Any]]]]: ...
def summarize_json(rows_json: str) -> list[dict[str, Any]]: ...
def duration_seconds(text: str) -> float: ...
def version() -> str: ...
