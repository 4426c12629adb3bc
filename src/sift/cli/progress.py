"""How a job command shows a job: a progress bar on standard error, the replay notice, the
closing summary line and the exit status (``sift batch`` and ``sift crawl``, in-process
or through a server)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from sift.cli.exits import EXIT_FAILED, EXIT_OK

LIVE: Final = frozenset({"queued", "running"})


def interrupted_line(job_id: str) -> str:
    """Said at Ctrl-C, before the job command cancels its job and writes what it has."""
    return (
        f"sift: interrupted; cancelling job {job_id} and writing the results it has "
        "(Ctrl-C again to stop now)"
    )


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-/s" if speed is None else f"{speed:.1f}/s")


class BatchProgress:
    """A rich progress bar on standard error: done, failed, total, rate, ETA."""

    def __init__(self, total: int, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failed {task.fields[failed]}"),
            _Rate(),
            TimeRemainingColumn(),
            console=console,
        )
        self._task = self._progress.add_task("batch", total=total, failed=0)

    def __enter__(self) -> BatchProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def update(self, view: Mapping[str, Any]) -> None:
        counts = view["counts"]
        self._progress.update(
            self._task,
            total=view["targets_total"],  # a crawl's grows
            completed=view["targets_done"],
            failed=counts["failed"] + counts["cancelled"],
            description=f"{view.get('kind', 'batch')} {view['status']}",
        )


def summary(view: Mapping[str, Any], elapsed_s: float) -> str:
    c = view["counts"]
    line = (
        f"sift: job {view['id']} {view['status']}: {c['done']} done, {c['failed']} failed, "
        f"{c['cancelled']} cancelled of {view['targets_total']} in {elapsed_s:.1f} s"
    )
    return line + (f" ({view['error']})" if view["error"] else "")


def exit_code(view: Mapping[str, Any]) -> int:
    return EXIT_OK if view["status"] == "done" else EXIT_FAILED


def replay_notice(view: Mapping[str, Any]) -> str:
    """What to say when the list's key found an existing job: its results are replayed."""
    return (
        f"sift: this list already ran as job {view['id']} ({view['status']}); its stored "
        "results follow and nothing is fetched again — pass --new to fetch the list again"
    )
