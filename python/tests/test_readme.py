"""The README's examples run: every fenced block right after a ``<!-- runnable ... -->`` comment
is executed from the repository root (python blocks with the interpreter, sh blocks with bash),
so an example that drifts from the code fails here. Slow examples are left unmarked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKED = re.compile(r"<!-- runnable[^>]*-->\n```(\w+)\n(.*?)\n```", re.DOTALL)


def runnable_blocks() -> list[tuple[str, str]]:
    return MARKED.findall((ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_readme_marks_examples() -> None:
    assert runnable_blocks(), "no <!-- runnable --> block in README.md"


@pytest.mark.parametrize(
    ("lang", "code"), runnable_blocks(), ids=lambda v: v.splitlines()[0][:40] if "\n" in v else v
)
def test_readme_block_runs(lang: str, code: str) -> None:
    if lang == "python":
        command = [sys.executable, "-c", code]
    elif lang in ("sh", "bash"):
        command = ["bash", "-euo", "pipefail", "-c", code]
    else:
        pytest.fail(f"runnable block in {lang}: only python and sh run")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
