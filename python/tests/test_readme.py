"""The README's and the docs pages' examples run: every fenced block right after a
``<!-- runnable ... -->`` comment is executed from the repository root (python blocks with the
interpreter, sh blocks with bash, the ``recoup`` that ``cargo build`` made first on PATH), so an
example that drifts from the code fails here. Slow examples are left unmarked. Every page in
docs/ starts with the command it is about, right under its title."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKED = re.compile(r"<!-- runnable[^>]*-->\n```(\w+)\n(.*?)\n```", re.DOTALL)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A page: its title, then (after an optional runnable marker) a fenced command.
STARTS_WITH_COMMAND = re.compile(r"# [^\n]+\n\n(<!-- runnable[^>]*-->\n)?```(sh|python)\n\S")


def runnable_blocks() -> list[tuple[str, str, str]]:
    return [
        (page.relative_to(ROOT).as_posix(), lang, code)
        for page in PAGES
        for lang, code in MARKED.findall(page.read_text(encoding="utf-8"))
    ]


def recoup_dir() -> Path:
    """Where the `recoup` binary of this checkout is (scripts/test.sh builds it before pytest)."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for profile in ("debug", "release"):
        if (target / profile / "recoup").is_file():
            return target / profile
    pytest.fail(f"no recoup binary under {target}: run `cargo build -p recoup-cli` first")


def test_the_readme_marks_examples() -> None:
    assert any(page == "README.md" for page, _, _ in runnable_blocks()), "no runnable README block"


@pytest.mark.parametrize("page", PAGES[1:], ids=lambda p: p.name)
def test_every_docs_page_starts_with_a_command(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert STARTS_WITH_COMMAND.match(text), f"{page.name} does not open with a fenced command"


@pytest.mark.parametrize(
    ("page", "lang", "code"),
    runnable_blocks(),
    ids=lambda v: v.splitlines()[0][:40] if "\n" in v else v,
)
def test_marked_block_runs(page: str, lang: str, code: str, tmp_path: Path) -> None:
    env = dict(os.environ)
    if lang == "python":
        command = [sys.executable, "-c", code]
    elif lang in ("sh", "bash"):
        command = ["bash", "-euo", "pipefail", "-c", code]
        bin_dir = recoup_dir()
        env["RECOUP_BIN"] = str(bin_dir / "recoup")
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    else:
        pytest.fail(f"runnable block in {lang} ({page}): only python and sh run")
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as o, err.open("w") as e:
        # Its own process group: a server a block started in the background is stopped with it,
        # also when the block fails before its own `kill`.
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=o, stderr=e, start_new_session=True
        )
        try:
            status = proc.wait(timeout=300)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    assert status == 0, (
        f"{page}:\n{code}\n--- stdout\n{out.read_text()}\n--- stderr\n{err.read_text()}"
    )
