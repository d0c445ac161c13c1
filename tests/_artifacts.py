"""Helpers of the artifact tests (test_inference, test_recurrent_artifacts,
test_dreamer_image_artifacts): a scratch copy of an artifacts folder to damage, and a fresh
interpreter to load one in."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def copy_of(path: Path, tmp_path: Path) -> Path:
    """A copy of the artifacts folder ``path`` under ``tmp_path``, for a test to break."""
    dst = tmp_path / "copy"
    shutil.copytree(path, dst)
    return dst


def run_python(code: str) -> str:
    """Run ``code`` in a new Python process (so only what it imports is loaded); its stdout."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout
