"""Diagnostics: every metric of a run in memory, a self-contained HTML report, a live terminal view.

    from rlox.dashboard import MetricsCollector, HTMLReport, TerminalDashboard
    collector = MetricsCollector()
    trainer = PPOTrainer(env="CartPole-v1", callbacks=[collector, TerminalDashboard()], seed=42)
    trainer.train(total_timesteps=50_000)
    HTMLReport(collector).save("training_report.html")   # one file: no network, no CDN
    collector.to_csv("metrics.csv"); collector.to_json("metrics.json")

The report plots reward (training and evaluation), episode length, losses, KL, entropy,
learning rate, steps/second and the timing breakdown, one panel per remaining metric, and a
table of the run's configuration. Plots are drawn by a small inline script on ``<canvas>``.
"""
from __future__ import annotations

import csv
import html
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from rlox.callbacks import Callback
from rlox.checkpointing import atomic_write_text
from rlox.logging import algo_env_label, run_metadata, scalar_metrics

__all__ = ["MetricsCollector", "HTMLReport", "TerminalDashboard", "sparkline"]


class MetricsCollector(Callback):
    """Keep every single-number metric of every iteration (and evaluation) in memory.

    Args:
        report_path: when given, write an ``HTMLReport`` there each time training ends.

    Attributes:
        run: algorithm, env, seed and config of the run (set when training starts);
        timings: seconds per phase from ``algo.timings`` (set when training ends);
        wall_seconds: training wall time.
    """

    def __init__(self, report_path: str | os.PathLike | None = None) -> None:
        super().__init__()
        self.report_path = Path(report_path) if report_path is not None else None
        self._data: dict[str, tuple[list[int], list[float]]] = {}
        self.run: dict[str, Any] = {}
        self.timings: dict[str, float] = {}
        self.wall_seconds = 0.0
        self._t0: float | None = None

    # ------------------------------------------------------------------ hooks
    def on_training_start(self) -> None:
        self.run = run_metadata(self.algo)
        self._t0 = time.perf_counter()

    def record(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Add the single-number entries of ``metrics`` at ``step``."""
        for k, v in scalar_metrics(metrics).items():
            steps, values = self._data.setdefault(k, ([], []))
            steps.append(int(step))
            values.append(v)

    def on_update(self, metrics: Mapping[str, Any]) -> None:
        self.record(self.num_timesteps, metrics)

    def on_eval(self, metrics: Mapping[str, Any]) -> None:
        self.record(self.num_timesteps, metrics)

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self._t0 is not None:
            self.wall_seconds += time.perf_counter() - self._t0
            self._t0 = None
        self.timings = {k: float(v) for k, v in getattr(self.algo, "timings", {}).items()}
        if self.report_path is not None:
            HTMLReport(self).save(self.report_path)

    # ------------------------------------------------------------------ access
    def names(self) -> list[str]:
        """Recorded metric names, in the order they first appeared."""
        return list(self._data)

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps ``[K]`` int64, values ``[K]`` float64) of one metric."""
        if name not in self._data:
            raise KeyError(f"no metric {name!r} was recorded; recorded: {', '.join(self._data) or 'none'}")
        steps, values = self._data[name]
        return np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64)

    def latest(self, name: str, default: float = math.nan) -> float:
        data = self._data.get(name)
        return data[1][-1] if data and data[1] else default

    def __len__(self) -> int:
        return max((len(s) for s, _ in self._data.values()), default=0)

    def __contains__(self, name: object) -> bool:
        return name in self._data

    # ------------------------------------------------------------------ export
    def to_dict(self) -> dict[str, Any]:
        """``{"run": ..., "timings": ..., "wall_seconds": ..., "metrics": {name: {"steps", "values"}}}``
        (NaN and infinities become None, so the result is valid JSON)."""
        def clean(v: float) -> float | None:
            return v if math.isfinite(v) else None
        return {"run": self.run, "timings": self.timings, "wall_seconds": self.wall_seconds,
                "metrics": {k: {"steps": list(s), "values": [clean(v) for v in vals]}
                            for k, (s, vals) in self._data.items()}}

    def to_json(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        atomic_write_text(json.dumps(self.to_dict(), indent=1, default=str), path)
        return path

    def to_csv(self, path: str | os.PathLike) -> Path:
        """One row per recorded step, ``step`` then one column per metric (empty where a metric
        was not recorded at that step)."""
        path = Path(path)
        rows: dict[int, dict[str, float]] = {}
        for k, (steps, values) in self._data.items():
            for s, v in zip(steps, values):
                rows.setdefault(s, {})[k] = v
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=["step", *self._data], restval="")
            w.writeheader()
            for s in sorted(rows):
                w.writerow({"step": s, **rows[s]})
        return path


# ====================================================================== HTML report
# Panels: (title, metric names or name prefixes, y label). Metrics not placed in a panel get
# one panel each under "More metrics".
_PANELS: list[tuple[str, tuple[str, ...], str]] = [
    ("Episode reward", ("train/mean_reward", "eval/mean_reward"), "return"),
    ("Episode length", ("train/mean_length", "eval/mean_length"), "steps"),
    ("Losses", ("loss/policy_loss", "loss/value_loss", "loss/loss", "loss/actor_loss", "loss/critic_loss",
                "loss/q_loss", "loss/entropy_loss", "loss/alpha_loss", "loss/td_loss"), "loss"),
    ("KL divergence", ("loss/approx_kl", "loss/kl"), "KL"),
    ("Entropy", ("loss/entropy",), "nats"),
    ("Learning rate", ("train/learning_rate",), "lr"),
    ("Steps per second", ("time/sps",), "steps/s"),
]
_NOT_PLOTTED = {"train/timesteps", "train/episodes", "eval/episodes", "eval/best_mean_reward", "eval/std_reward",
                "time/iteration", "time/evaluation", "time/env_step", "time/gae_compute", "time/gradient_update",
                "time/policy_forward"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2329}
header{background:#1d2329;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#b8c0c8;font-size:13px}
main{padding:16px 24px}h2{font-size:16px;margin:22px 0 10px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:14px}
.panel{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:10px 12px}
.panel h3{margin:0 0 6px;font-size:14px}.panel canvas{width:100%;height:220px;display:block}
.legend{font-size:12px;color:#4a545e;margin-top:4px}.legend span{margin-right:12px;white-space:nowrap}
.legend i{display:inline-block;width:14px;height:3px;margin-right:4px;vertical-align:middle}
table{border-collapse:collapse;background:#fff;font-size:13px}
td,th{border:1px solid #dde1e6;padding:4px 10px;text-align:left}th{background:#eef0f3}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;
padding:8px 14px}.card b{display:block;font-size:20px}.card span{font-size:12px;color:#5b6670}
"""

# The drawing script: reads the embedded JSON, draws each panel on its canvas (line charts;
# a bar chart for timings), then marks the page: canvas[data-ink] = painted pixels,
# body[data-rendered] = panels drawn. Errors are recorded on <html data-errors>.
_JS = r"""
(function(){
"use strict";
var COLORS=["#1f77b4","#d62728","#2ca02c","#ff7f0e","#9467bd","#8c564b","#e377c2","#17becf","#7f7f7f"];
var data=JSON.parse(document.getElementById("rlox-data").textContent);
function nice(x,round){var e=Math.floor(Math.log10(x)),f=x/Math.pow(10,e),n;
 if(round){n=f<1.5?1:f<3?2:f<7?5:10}else{n=f<=1?1:f<=2?2:f<=5?5:10}return n*Math.pow(10,e)}
function ticks(lo,hi,count){if(!(hi>lo)){var d=Math.abs(lo)*0.1||1;lo-=d;hi+=d}
 var step=nice(nice(hi-lo,false)/(count-1),true),a=Math.floor(lo/step),b=Math.ceil(hi/step),out=[];
 for(var i=a;i<=b;i++){out.push(i*step)}out.step=step;return out}
function fmt(v,step){var a=Math.abs(v);if(a<step*1e-6)return"0";if(a>=1e6||a<1e-4)return v.toExponential(1);
 return v.toFixed(Math.max(0,Math.min(8,-Math.floor(Math.log10(step)))))}
function setup(canvas){var r=window.devicePixelRatio||1,w=canvas.clientWidth||420,h=canvas.clientHeight||220;
 canvas.width=Math.round(w*r);canvas.height=Math.round(h*r);var c=canvas.getContext("2d");c.scale(r,r);
 return{c:c,w:w,h:h}}
function ink(canvas){var c=canvas.getContext("2d"),d=c.getImageData(0,0,canvas.width,canvas.height).data,n=0;
 for(var i=3;i<d.length;i+=4){if(d[i]>0)n++}return n}
function lineChart(canvas,series){var g=setup(canvas),c=g.c,L=56,R=24,T=8,B=26,W=g.w-L-R,H=g.h-T-B;
 var xs=[],ys=[];series.forEach(function(s){s.steps.forEach(function(x,i){var y=s.values[i];
  if(y!==null&&isFinite(y)){xs.push(x);ys.push(y)}})});
 if(!ys.length){c.fillStyle="#8a949e";c.font="13px sans-serif";c.fillText("no finite values",L,T+H/2);return 0}
 var xt=ticks(Math.min.apply(null,xs),Math.max.apply(null,xs),6),yt=ticks(Math.min.apply(null,ys),Math.max.apply(null,ys),5);
 var x0=xt[0],x1=xt[xt.length-1],y0=yt[0],y1=yt[yt.length-1];
 function X(v){return L+(v-x0)/(x1-x0||1)*W}function Y(v){return T+H-(v-y0)/(y1-y0||1)*H}
 c.strokeStyle="#e3e6ea";c.fillStyle="#5b6670";c.font="11px sans-serif";c.lineWidth=1;
 yt.forEach(function(v){c.beginPath();c.moveTo(L,Y(v));c.lineTo(L+W,Y(v));c.stroke();c.textAlign="right";
  c.fillText(fmt(v,yt.step),L-4,Y(v)+4)});
 xt.forEach(function(v){c.textAlign="center";c.fillText(fmt(v,xt.step),X(v),T+H+16)});
 c.strokeStyle="#9aa3ab";c.strokeRect(L,T,W,H);
 series.forEach(function(s,k){c.strokeStyle=COLORS[k%COLORS.length];c.fillStyle=c.strokeStyle;c.lineWidth=1.6;
  c.beginPath();var pen=false,pts=0;s.steps.forEach(function(x,i){var y=s.values[i];
   if(y===null||!isFinite(y)){pen=false;return}if(pen){c.lineTo(X(x),Y(y))}else{c.moveTo(X(x),Y(y));pen=true}pts++});
  c.stroke();if(pts<40){s.steps.forEach(function(x,i){var y=s.values[i];if(y!==null&&isFinite(y)){
   c.beginPath();c.arc(X(x),Y(y),2.2,0,6.2832);c.fill()}})}});
 return ys.length}
function barChart(canvas,items){var g=setup(canvas),c=g.c,L=120,R=50,T=8,rowH=Math.min(26,(g.h-T*2)/Math.max(items.length,1));
 var max=Math.max.apply(null,items.map(function(d){return d[1]}).concat([1e-12]));
 c.font="12px sans-serif";items.forEach(function(d,i){var y=T+i*rowH,w=(g.w-L-R)*d[1]/max;
  c.fillStyle="#1d2329";c.textAlign="right";c.fillText(d[0],L-6,y+rowH*0.65);
  c.fillStyle=COLORS[i%COLORS.length];c.fillRect(L,y+rowH*0.15,Math.max(w,1),rowH*0.7);
  c.fillStyle="#1d2329";c.textAlign="left";c.fillText(d[1].toFixed(1)+"%",L+w+4,y+rowH*0.65)});return items.length}
var drawn=0;
document.querySelectorAll("canvas[data-panel]").forEach(function(canvas){
 var spec=JSON.parse(canvas.getAttribute("data-panel")),n;
 if(spec.kind==="bars"){n=barChart(canvas,data.timing)}else{
  var series=spec.metrics.filter(function(m){return data.metrics[m]}).map(function(m){return data.metrics[m]});
  n=lineChart(canvas,series);var lg=canvas.parentNode.querySelector(".legend");
  if(lg){spec.metrics.filter(function(m){return data.metrics[m]}).forEach(function(m,k){var s=document.createElement("span"),i=document.createElement("i");
   i.style.background=COLORS[k%COLORS.length];s.appendChild(i);s.appendChild(document.createTextNode(m));lg.appendChild(s)})}}
 canvas.setAttribute("data-points",String(n));canvas.setAttribute("data-ink",String(ink(canvas)));drawn++});
document.body.setAttribute("data-rendered",String(drawn));
})();
"""


class HTMLReport:
    """A single self-contained HTML file (inline CSS, data and drawing script; nothing fetched)
    with the plots and configuration of a ``MetricsCollector``'s run.

    Args:
        collector: the collector (during or after training).
        title: page title (default: "<algorithm> on <env>").
    """

    def __init__(self, collector: MetricsCollector, title: str | None = None) -> None:
        if not isinstance(collector, MetricsCollector):
            raise TypeError(f"HTMLReport needs a rlox.dashboard.MetricsCollector, got {type(collector).__name__}")
        self.collector = collector
        run = collector.run
        self.title = title or (f"{run.get('algorithm', 'rlox')} on {run.get('env', '?')}" if run else "rlox training run")

    def _panels(self) -> list[tuple[str, list[str], str]]:
        names = self.collector.names()
        used: set[str] = set()
        panels = []
        for title, metrics, ylabel in _PANELS:
            present = [m for m in metrics if m in names]
            used.update(metrics)
            panels.append((title, present or list(metrics[:1]), ylabel))
        extra = [n for n in names if n not in used and n not in _NOT_PLOTTED]
        return panels + [(n, [n], "") for n in extra]

    def _timing(self) -> list[tuple[str, float]]:
        c = self.collector
        wall = c.wall_seconds or sum(c.timings.values())
        if wall <= 0:
            return []
        items = [(k, 100.0 * v / wall) for k, v in c.timings.items() if v > 0]
        rest = 100.0 - sum(p for _, p in items)
        if rest > 0.05:
            items.append(("other", rest))
        return sorted(items, key=lambda kv: -kv[1])

    def render(self) -> str:
        """The report as one HTML string."""
        c = self.collector
        data = {"metrics": c.to_dict()["metrics"], "timing": [[k, round(v, 2)] for k, v in self._timing()]}
        payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        esc = html.escape
        run = c.run
        cards = []
        for label, name in (("final training reward", "train/mean_reward"), ("best eval reward", "eval/best_mean_reward"),
                            ("last eval reward", "eval/mean_reward"), ("steps/s (last)", "time/sps")):
            v = c.latest(name)
            if math.isfinite(v):
                cards.append(f'<div class="card"><b>{v:,.2f}</b><span>{esc(label)}</span></div>')
        steps = c.series("train/timesteps")[1][-1] if "train/timesteps" in c else None
        if steps is not None:
            cards.append(f'<div class="card"><b>{int(steps):,}</b><span>env steps</span></div>')
        if c.wall_seconds:
            cards.append(f'<div class="card"><b>{c.wall_seconds:,.1f} s</b><span>wall time</span></div>')

        def panel(title: str, metrics: list[str], kind: str = "lines") -> str:
            spec = esc(json.dumps({"kind": kind, "metrics": metrics}), quote=True)
            return (f'<div class="panel"><h3>{esc(title)}</h3><canvas data-panel="{spec}"></canvas>'
                    f'<div class="legend"></div></div>')

        panels = self._panels()
        main_panels = "".join(panel(t, m) for t, m, _ in panels[:len(_PANELS)])
        timing_panel = panel("Timing breakdown (% of wall time)", [], "bars") if self._timing() else ""
        more = "".join(panel(t, m) for t, m, _ in panels[len(_PANELS):])
        rows = [("algorithm", run.get("algorithm")), ("env", run.get("env")), ("seed", run.get("seed")),
                ("total_timesteps", run.get("total_timesteps")), ("started", run.get("started"))]
        rows += [(k, v) for k, v in (run.get("config") or {}).items()]
        table = "".join(f"<tr><th>{esc(str(k))}</th><td>{esc(json.dumps(v) if not isinstance(v, str) else v)}</td></tr>"
                        for k, v in rows if v is not None)
        return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{esc(self.title)}</title>
<script>window.addEventListener("error",function(e){{var h=document.documentElement;
h.setAttribute("data-errors",(h.getAttribute("data-errors")||"")+(e.message||"error")+"\\n")}});</script>
<style>{_CSS}</style></head>
<body><header><h1>{esc(self.title)}</h1><p>rlox training report, generated {esc(time.strftime("%Y-%m-%d %H:%M:%S"))}</p></header>
<main><div class="cards">{"".join(cards)}</div>
<h2>Training curves</h2><div class="grid">{main_panels}{timing_panel}</div>
{f'<h2>More metrics</h2><div class="grid">{more}</div>' if more else ""}
<h2>Configuration</h2><table>{table}</table></main>
<script type="application/json" id="rlox-data">{payload}</script>
<script>{_JS}</script>
<noscript>The plots need JavaScript; the data is embedded in this file as JSON (id "rlox-data").</noscript>
</body></html>
"""

    def save(self, path: str | os.PathLike) -> Path:
        """Write the report to ``path`` (atomically); returns the path."""
        path = Path(path)
        if str(path.parent) not in ("", "."):
            path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.render(), path)
        return path


# ====================================================================== terminal
_BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int = 40) -> str:
    """``values`` (the last ``width`` finite ones) as a line of block characters ▁..█."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))][-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-12:
        return _BLOCKS[len(_BLOCKS) // 2] * len(vals)
    return "".join(_BLOCKS[min(len(_BLOCKS) - 1, int((v - lo) / (hi - lo) * len(_BLOCKS)))] for v in vals)


class TerminalDashboard(Callback):
    """A live Rich view of training: progress, reward sparkline, evaluation, SPS, losses, timing.

    Redraws at most ``refresh_per_second`` times a second (so it costs little), and once more
    when training ends.

    Args:
        console: a ``rich.console.Console`` (default: a new one on the terminal).
        refresh_per_second: redraw rate limit.
        history: rewards kept for the sparkline.
        transient: clear the display when training ends.
    """

    def __init__(self, console: Any = None, refresh_per_second: float = 2.0, history: int = 60,
                 transient: bool = False) -> None:
        super().__init__()
        if not (isinstance(refresh_per_second, (int, float)) and refresh_per_second > 0):
            raise ValueError(f"TerminalDashboard refresh_per_second must be > 0, got {refresh_per_second!r}")
        self.console = console
        self.min_interval = 1.0 / float(refresh_per_second)
        self.history = int(history)
        self.transient = bool(transient)
        self.rewards: list[float] = []
        self.metrics: dict[str, float] = {}
        self.eval: dict[str, float] = {}
        self.live: Any = None
        self._last = 0.0
        self._start_step = 0
        self._total = 0
        self.frames = 0

    def on_training_start(self) -> None:
        from rich.live import Live

        algo = self.algo
        self._start_step = int(algo.num_timesteps)
        self._total = int(getattr(algo, "remaining_timesteps", 0))
        self.live = Live(self.render(), console=self.console, auto_refresh=False, transient=self.transient)
        self.live.start()
        self._last = time.perf_counter()

    def on_update(self, metrics: Mapping[str, Any]) -> None:
        self.metrics = scalar_metrics(metrics)
        r = self.metrics.get("train/mean_reward")
        if r is not None and math.isfinite(r):
            self.rewards.append(r)
            del self.rewards[:-self.history]
        now = time.perf_counter()
        if self.live is not None and now - self._last >= self.min_interval:
            self._last = now
            self.live.update(self.render(), refresh=True)
            self.frames += 1

    def on_eval(self, metrics: Mapping[str, Any]) -> None:
        self.eval = scalar_metrics(metrics)

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self.live is not None:
            self.live.update(self.render(), refresh=True)
            self.frames += 1
            self.live.stop()
            self.live = None

    def render(self) -> Any:
        """The current view (a Rich renderable)."""
        from rich.console import Group
        from rich.panel import Panel
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        algo = self.algo
        done = (int(algo.num_timesteps) - self._start_step) if algo is not None else 0
        head = Table.grid(padding=(0, 2))
        head.add_column(justify="right", style="bold")
        head.add_column()
        head.add_row("progress", Text(f"{done:,} / {self._total:,} steps"))
        m = self.metrics
        reward = m.get("train/mean_reward", math.nan)
        head.add_row("reward", Text(f"{reward:9.2f}  " if math.isfinite(reward) else "        -  ")
                     + Text(sparkline(self.rewards, 48), style="cyan"))
        if self.eval:
            head.add_row("eval", Text(f"{self.eval.get('eval/mean_reward', math.nan):9.2f} "
                                      f"(best {self.eval.get('eval/best_mean_reward', math.nan):.2f})"))
        head.add_row("SPS", Text(f"{m.get('time/sps', 0.0):9,.0f}"))
        losses = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
        keys = [k for k in m if k.startswith("loss/")][:8]
        for k in keys:
            losses.add_column(k.split("/", 1)[1], justify="right")
        if keys:
            losses.add_row(*[f"{m[k]:.4g}" for k in keys])
        timings = getattr(algo, "timings", {}) if algo is not None else {}
        total = sum(timings.values())
        timing = Text("  ".join(f"{k} {100 * v / total:.0f}%" for k, v in timings.items() if v > 0)
                      if total > 0 else "", style="dim")
        name = (getattr(algo, "name", "") or type(algo).__name__) if algo is not None else "rlox"
        env = (algo_env_label(algo) or "") if algo is not None else ""
        bar = ProgressBar(total=max(self._total, 1), completed=min(done, max(self._total, 1)), width=60)
        return Panel(Group(bar, head, losses, timing), title=f"rlox · {name} · {env}",
                     border_style="blue")
