"""Result tables in the formats users' tools read: CSV, JSON and Parquet.

``python -m recoup.tables FILE`` reads a JSON list of rows on stdin and writes them to FILE in
the format its extension names (``.csv``, ``.json``, ``.parquet``), with a dtype per column
(:func:`recoup.frame`). ``recoup run|sweep|population --format parquet`` writes its tables
through it: Parquet goes through pandas and pyarrow rather than Rust's arrow/parquet crates,
which would add 49 crates and about 190 CPU-seconds to the release build (BENCHMARKS.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "json", "parquet")


def write(df: pd.DataFrame, path: str | Path) -> Path:
    """Writes ``df`` to ``path`` in the format of its extension; ``ValueError`` for another
    extension, ``ImportError`` naming pyarrow when Parquet cannot be written."""
    path = Path(path)
    fmt = path.suffix.lstrip(".")
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "json":
        path.write_text(df.to_json(orient="records", indent=2) + "\n", encoding="utf-8")
    elif fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError as e:
            raise ImportError(f"writing {path} needs pyarrow (pip install pyarrow): {e}") from e
        df.to_parquet(path, index=False)
    else:
        raise ValueError(f"{path}: unknown format {fmt!r}; the formats are {', '.join(FORMATS)}")
    return path


def main() -> None:
    from recoup import frame

    if len(sys.argv) != 2:
        sys.exit("usage: python -m recoup.tables FILE.{csv,json,parquet} < rows.json")
    rows: list[dict[str, Any]] = json.load(sys.stdin)
    try:
        write(frame(rows), sys.argv[1])
    except (ImportError, ValueError, OSError) as e:
        sys.exit(f"recoup.tables: {e}")


if __name__ == "__main__":
    main()
