"""Progress of a long run: a bar redrawn in place on a terminal, plain lines in a log.

    with Progress(total=len(steps), what="campaign") as bar:
        for step in steps:
            bar.start(step.name)              # what it is doing now
            ...
            bar.done(f"{step.name}: ok")      # a step finished; its result line, if it has one

On a terminal (the stream is a tty) one line at the bottom is redrawn in place, every `tick` seconds
too: what is running, done/total, the time so far and the time left; `print` (and `done`'s line) put a
message above it.  Elsewhere (a pipe, a log file) nothing is redrawn: `start` writes one line
"[3/10] what: label; 1m05s so far, about 2m10s left" and `done`'s line gets the same facts appended,
so a log keeps one readable line per step.  The time left is the mean time of the steps done so far
times the steps still to do (units, when a step counts more than one: seconds of a timed run).
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")


def clock_text(seconds: float) -> str:
    """45s, 3m05s, 1h02m."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def estimate_left(elapsed: float, done: float, total: float, since_last: float = 0.0) -> float | None:
    """Seconds left: (elapsed / done) per unit for the (total - done) units still to do, less the time the
    step under way has already run (but never below the units after it); None before any unit is done."""
    if done <= 0 or total <= 0:
        return None
    per = elapsed / done
    remaining = max(total - done, 0.0)
    return max(per * remaining - since_last, per * max(remaining - 1, 0.0), 0.0)


class Progress:
    """done/total of a long run, with what it is doing and the time left (module doc)."""

    def __init__(self, total: float, what: str = "", *, unit: str = "", stream: IO[str] | None = None,
                 tty: bool | None = None, clock: Callable[[], float] = time.monotonic, tick: float = 1.0,
                 width: int | None = None, label: str = ""):
        self.total, self.what, self.unit = total, what, unit
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            try:
                tty = self.stream.isatty()
            except (AttributeError, ValueError):
                tty = False
        self.tty, self.clock, self.tick, self.width = tty, clock, tick, width
        self.count = 0.0  # units done
        self.steps = 0  # done() calls
        self.label = label  # what the bar says is under way
        self.began = clock()
        self.last = self.began  # when the latest unit was done
        self._lock = threading.RLock()
        self._drawn = False
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._closed = False

    # -- the facts ---------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self.clock() - self.began

    def left(self) -> float | None:
        """Seconds left, estimated from the steps so far (None before the first is done)."""
        now = self.clock()
        return estimate_left(self.last - self.began, self.count, self.total, now - self.last)

    def _number(self, x: float) -> str:
        return f"{x:.0f}" if self.unit or x != int(x) else f"{int(x)}"

    def counts(self) -> str:
        shown = min(self.count, self.total) if self.total else self.count
        text = f"{self._number(shown)}/{self._number(self.total)}"
        return f"{text} {self.unit}" if self.unit else text

    def times(self) -> str:
        left = self.left()
        return (f"{clock_text(self.elapsed())} so far, "
                + ("time left unknown yet" if left is None else f"about {clock_text(left)} left"))

    def _head(self) -> str:
        return f"[{self.counts()}]" + (f" {self.what}" if self.what else "")

    def line(self, label: str | None = None) -> str:
        """The plain line: "[3/10] what: label; 1m05s so far, about 2m10s left"."""
        label = self.label if label is None else label
        return f"{self._head()}" + (f": {label}" if label else "") + f"; {self.times()}"

    def bar(self) -> str:
        """The terminal's line: "what [#####.....] 3/10, 1m05s so far, about 2m10s left: label", cut to fit."""
        columns = self.width or shutil.get_terminal_size((100, 24)).columns
        cells = 20
        share = min(self.count / self.total, 1.0) if self.total else 0.0
        filled = int(share * cells)
        text = ((f"{self.what} " if self.what else "") + "[" + "#" * filled + "." * (cells - filled) + "] "
                + f"{self.counts()}, {self.times()}" + (f": {self.label}" if self.label else ""))
        return text if len(text) < columns else text[:max(columns - 4, 10)] + "..."

    # -- writing -----------------------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def _clear(self) -> None:
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False

    def _draw(self) -> None:
        if self.tty and not self._closed:
            self._write("\r\x1b[K" + self.bar())
            self._drawn = True

    def print(self, message: str, stream: IO[str] | None = None) -> None:
        """A message line: above the bar on a terminal, as it is elsewhere; `stream`: another stream than the
        bar's (stdout beside a bar on stderr: the bar is cleared first all the same)."""
        with self._lock:
            self._clear()
            if stream is None or stream is self.stream:
                self._write(message.rstrip("\n") + "\n")
            else:
                try:
                    stream.write(message.rstrip("\n") + "\n")
                    stream.flush()
                except (OSError, ValueError):
                    pass
            self._draw()

    def start(self, label: str) -> None:
        """A step begins: the bar shows `label`; in a log, one line with the progress so far."""
        with self._lock:
            self.label = label
            if self.tty:
                self._draw()
            else:
                self._write(self.line() + "\n")

    def done(self, line: str | None = None, n: float = 1, label: str | None = None) -> None:
        """A step of `n` units finished: `line` (its result, if any) above the bar, or in a log with the
        progress appended; `label`: what the bar says next."""
        with self._lock:
            self.count += n
            self.steps += 1
            self.last = self.clock()
            if label is not None:
                self.label = label
            if line is not None:
                if self.tty:
                    self.print(line)
                else:
                    self._write(f"{line} [{self.counts()}; {self.times()}]\n")
            elif self.tty:
                self._draw()

    def close(self) -> None:
        """Erase the bar and say how long it all took (a line in a log too)."""
        with self._lock:
            if self._closed:
                return
            self._stop.set()
            self._clear()
            self._write(f"{self._head()}: finished in {clock_text(self.elapsed())}\n")
            self._closed = True
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(1.0)

    # -- use -----------------------------------------------------------------------------------------

    def _tick(self) -> None:
        while not self._stop.wait(self.tick):
            with self._lock:
                if self._drawn:
                    self._draw()

    def __enter__(self) -> Progress:
        if self.tty and self.tick > 0:
            self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._ticker.start()
        with self._lock:
            self._draw()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @classmethod
    def over(cls, items: Iterable[T], what: str = "", label: Callable[[T], str] = str, total: int | None = None,
             **kwargs) -> Iterator[T]:
        """Each item of `items`, a step each: `start(label(item))` before, `done()` after."""
        items = list(items) if total is None else items
        with cls(len(items) if total is None else total, what, **kwargs) as bar:
            for item in items:
                bar.start(label(item))
                yield item
                bar.done()
