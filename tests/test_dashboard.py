"""rlox.dashboard: MetricsCollector exports, the HTML report in a real (headless) browser, the
terminal dashboard."""
import csv
import io
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from rlox.algorithms.ppo import PPO
from rlox.callbacks import EvalCallback
from rlox.dashboard import HTMLReport, MetricsCollector, TerminalDashboard, sparkline

SMALL = dict(n_envs=8, n_steps=32, n_epochs=2, batch_size=128)


@pytest.fixture(scope="module")
def collector():
    c = MetricsCollector()
    PPO("CartPole-v1", seed=0, callbacks=[c, EvalCallback(eval_freq=512, n_eval_episodes=2)], **SMALL).train(2048)
    return c


def test_collector_series_and_exports(collector, tmp_path):
    steps, values = collector.series("train/mean_reward")
    assert list(steps) == list(range(256, 2049, 256)) and len(collector) == 8
    assert list(collector.series("eval/mean_reward")[0]) == [512, 1024, 1536, 2048]
    assert collector.run["algorithm"] == "ppo" and collector.run["config"]["n_steps"] == 32
    assert collector.timings["gradient_update"] > 0 and collector.wall_seconds > 0
    with pytest.raises(KeyError, match="no metric 'nope' was recorded"):
        collector.series("nope")
    data = json.loads(collector.to_json(tmp_path / "m.json").read_text())
    assert data["metrics"]["loss/policy_loss"]["steps"] == list(steps)
    rows = list(csv.DictReader(open(collector.to_csv(tmp_path / "m.csv"))))
    assert [int(r["step"]) for r in rows] == list(steps)
    assert float(rows[-1]["loss/value_loss"]) == pytest.approx(collector.latest("loss/value_loss"))
    assert rows[0]["eval/mean_reward"] == "" and rows[1]["eval/mean_reward"] != ""


def test_report_is_self_contained(collector, tmp_path):
    text = HTMLReport(collector).save(tmp_path / "sub" / "report.html").read_text()
    assert "<link" not in text and "src=" not in text and "@import" not in text
    assert "http://" not in text and "https://" not in text
    for needle in ("Episode reward", "Episode length", "Losses", "KL divergence", "Entropy", "Learning rate",
                   "Steps per second", "Timing breakdown", "Configuration", "clip_eps", "CartPole-v1"):
        assert needle in text, needle
    with pytest.raises(TypeError, match="needs a rlox.dashboard.MetricsCollector"):
        HTMLReport(object())


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium on this machine (apt-get install chromium)")
def test_report_in_headless_chromium(collector, tmp_path):
    path = HTMLReport(collector).save(tmp_path / "report.html")
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--enable-logging=stderr", "--v=0", "--window-size=1280,2000", f"--user-data-dir={tmp_path / 'profile'}",
           "--dump-dom", path.resolve().as_uri()]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    dom = out.stdout
    console = [line for line in out.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console                        # no console messages, errors included
    assert not re.search(r"<html[^>]*data-errors=", dom)   # the page's error handler saw nothing
    canvases = re.findall(r"<canvas ([^>]*)>", dom)
    rendered = int(re.search(r'<body[^>]*data-rendered="(\d+)"', dom).group(1))
    assert rendered == len(canvases) >= 8
    for attrs in canvases:
        points = int(re.search(r'data-points="(\d+)"', attrs).group(1))
        ink = int(re.search(r'data-ink="(\d+)"', attrs).group(1))
        assert points > 0 and ink > 2000, attrs          # axes, labels and the lines were painted


def test_terminal_dashboard_renders():
    from rich.console import Console

    buf = io.StringIO()
    dash = TerminalDashboard(console=Console(file=buf, force_terminal=True, width=110), refresh_per_second=1000)
    PPO("CartPole-v1", seed=0, callbacks=[dash, EvalCallback(eval_freq=512, n_eval_episodes=1)], **SMALL).train(1024)
    text = buf.getvalue()
    assert dash.frames >= 2 and dash.live is None
    assert "reward" in text and "SPS" in text and "eval" in text and "policy_loss" in text
    assert "1,024 / 1,024 steps" in text
    assert any(ch in text for ch in "▁▂▃▄▅▆▇█")


def test_sparkline():
    assert sparkline([]) == "" and sparkline([np.nan]) == ""
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, 5, 5]) == "▅▅▅"
    assert len(sparkline(range(100), width=10)) == 10
