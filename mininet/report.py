"""The run's report: a summary table on stdout, report.json and a plot."""

from __future__ import annotations

import json
from pathlib import Path


def job_summary(job: int, results: list[dict]) -> dict:
    """Figures of one job from its workers' result files."""
    ok = [r for r in results if "error" not in r and r.get("exit_code", 0) == 0]
    errors = [f"{r['host']}: {r['error']}" for r in results if "error" in r]
    summary = {"job": job, "workers": len(results), "ok": len(ok) == len(results),
               "errors": errors}
    if not ok:
        return summary
    r0 = min(ok, key=lambda r: r.get("rank", 0))
    comm = [r["comm"] for r in ok]
    elements = max(1, sum(c["elements"] for c in comm))
    steps = len(r0["steps"])
    summary.update({
        "aggregation": r0.get("aggregation"),
        "encoding": r0.get("encoding"),
        "result_encoding": r0.get("result_encoding"),
        "steps": steps,
        "final_test_accuracy": r0["final_test_accuracy"],
        "final_test_loss": r0.get("final_test_loss"),
        "steps_per_second": steps / r0["seconds"] if r0["seconds"] > 0 else None,
        "bytes_per_element_up": sum(c["bytes_sent"] for c in comm) / elements,
        # Of those, what retransmissions added (what loss or a full queue cost on top).
        "bytes_per_element_resent": sum(c.get("bytes_resent", 0) for c in comm) / elements,
        "bytes_per_element_down": sum(c["bytes_received"] for c in comm) / elements,
        "retransmissions": sum(c["retransmissions"] for c in comm),
        "identical_models": len({r["params_sha256"] for r in ok}) == 1,
        # sha256 of each worker's final float32 parameters, by host in rank order: a rerun
        # of the seed gives the same (DESIGN.md contract 10)
        "model_sha256": {r["host"]: r["params_sha256"]
                         for r in sorted(ok, key=lambda r: r.get("rank", 0))},
        "accuracy_curve": [(s["step"], s["test_accuracy"]) for s in r0["steps"]
                           if s["test_accuracy"] is not None],
    })
    if all("wall_seconds" in s for s in r0["steps"]):      # the torch workers log it
        summary["accuracy_time"] = [(0.0, r0["initial_test_accuracy"])] + [
            (s["wall_seconds"], s["test_accuracy"]) for s in r0["steps"]
            if s["test_accuracy"] is not None]
        summary["seconds_per_step"] = r0["seconds"] / max(1, steps)
        wires = [r["wire_bytes"] for r in ok if "wire_bytes" in r]
        if wires:
            summary["wire_bytes_per_step"] = max(w["tx"] for w in wires) / max(1, steps)
    return summary


def table(summaries: list[dict]) -> str:
    head = ("job", "workers", "up/down", "accuracy", "steps/s", "B/elem up", "B/elem down",
            "retx", "models")
    rows = []
    for s in summaries:
        if "final_test_accuracy" not in s:
            rows.append((s["job"], s["workers"], "-", "FAILED", "", "", "", "", ""))
            continue
        rows.append((s["job"], s["workers"],
                     f"{s['encoding']}/{s['result_encoding'] or 'float32'}",
                     f"{s['final_test_accuracy']:.4f}", f"{s['steps_per_second'] or 0:.2f}",
                     f"{s['bytes_per_element_up']:.3f}", f"{s['bytes_per_element_down']:.3f}",
                     s["retransmissions"], "identical" if s["identical_models"] else "DIFFER"))
    cols = list(zip(head, *rows, strict=False))
    widths = [max(len(str(c)) for c in col) for col in cols]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join(fmt.format(*map(str, r)) for r in (head, *rows))


def drops_on_failure(summaries: list[dict], counters: dict | None) -> list[str]:
    """When a job failed, each switch's drops by reason: where its packets went."""
    if not counters or all(s["ok"] for s in summaries):
        return []
    from controller.stats import drops_text
    return [f"switch {name} dropped: {c.get('error') or drops_text(c) or 'nothing'}"
            for name, c in counters.items()]


def title(run: dict, switches: int) -> str:
    """The plot's title: what the curves depend on, so two plots can be told apart."""
    how = "parameter server" if run["aggregation"] == "ps" else f"{run['encoding']} in-network"
    return (f"{run['topo']}, {count(switches, run['switch'] + ' switch', 'es')}, {how}, "
            f"loss {run['loss']:g}, {count(run['jobs'], 'job')}")


def count(n: int, noun: str, plural: str = "s") -> str:
    return f"{n} {noun}" + (plural if n != 1 else "")


def plot(summaries: list[dict], path: Path, title: str) -> bool:
    """Test accuracy against step, one line per job; False when there is nothing to draw."""
    return _plot(summaries, "accuracy_curve", "step", path, title,
                 lambda s: f"job {s['job']} ({s['encoding']}, {s['workers']} workers)")


def plot_time(summaries: list[dict], path: Path, title: str) -> bool:
    """Test accuracy against wall time (torch workers); False when there is nothing."""
    return _plot(summaries, "accuracy_time", "wall time since the first step (s)", path, title,
                 lambda s: f"job {s['job']} ({s['aggregation']}, {s['encoding']}, "
                           f"{s['workers']} workers)", marker="o", ms=3)


def _plot(summaries, key: str, xlabel: str, path: Path, title: str, label, **style) -> bool:
    curves = [s for s in summaries if s.get(key)]
    if not curves:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for s in curves:
        x, y = zip(*s[key], strict=True)
        ax.plot(x, y, label=label(s), **style)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write(out: Path, run: dict, summaries: list[dict], counters: dict | None) -> Path:
    report = {**run, "jobs": summaries, "switch_counters": counters}
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    return path
