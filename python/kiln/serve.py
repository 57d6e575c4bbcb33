"""Serving a compiled model to many threads: requests gathered into batches.

    import kiln, kiln.serve
    model = kiln.compile("model.onnx")            # a dynamic batch dim first
    with kiln.serve.Batcher(model, max_batch=32, max_delay_ms=2) as batcher:
        (y,) = batcher.run({"x": x})               # from any number of threads

Each request is one set of feeds whose first dim is its batch (usually 1).
A worker thread takes the oldest request, gathers the requests that arrive
within `max_delay_ms` (up to `max_batch` rows in all) whose inputs agree in
names, dtypes and every dim but the first, runs them as one batch
(concatenated along axis 0), and gives each request its rows of every
output. A model compiled once for every shape (the default for dynamic
dims) runs any batch size without compiling again.

Why in Python, not in the runtime: this is what a Ray Serve deployment or
a Python service needs (docs/serving.md), and the model's run() releases
the GIL, so the worker overlaps with the threads that submit.

Errors belong to their request: a request whose inputs do not fit the
model, or a batch whose run fails, is retried alone, so one bad request
fails only itself. The queue is bounded (`max_queue` requests): submit()
waits up to its `timeout` for room and then raises QueueFull.
"""

import collections
import concurrent.futures
import threading
import time

import numpy as np

__all__ = ["Batcher", "QueueFull", "Closed"]


class QueueFull(RuntimeError):
    """The batcher's queue stayed full for the submit's whole timeout."""


class Closed(RuntimeError):
    """The batcher is closed: it takes no more requests."""


class _Request:
    __slots__ = ("feeds", "rows", "key", "future", "arrived")

    def __init__(self, feeds, rows, key):
        self.feeds = feeds
        self.rows = rows
        self.key = key
        self.future = concurrent.futures.Future()
        self.arrived = time.monotonic()


def _signature(feeds):
    """What requests must share to run in one batch: input names, dtypes and
    every dim but the first."""
    return tuple(sorted((name, a.dtype.str, a.shape[1:]) for name, a in feeds.items()))


class Batcher:
    """Gathers requests from many threads into batched runs of `model` (a
    kiln.Model, or anything with run(output_names, feeds)).

    max_batch: the most rows one run takes (a request larger than that runs
    alone). max_delay_ms: how long the oldest request waits for others.
    max_queue: requests waiting at most. output_names: passed to run()."""

    def __init__(self, model, max_batch=32, max_delay_ms=2.0, max_queue=1024,
                 output_names=None):
        if max_batch < 1 or max_queue < 1 or max_delay_ms < 0:
            raise ValueError("max_batch and max_queue must be 1 or more, max_delay_ms 0 or more")
        self._model = model
        self._max_batch = int(max_batch)
        self._max_delay = float(max_delay_ms) / 1e3
        self._max_queue = int(max_queue)
        self._output_names = output_names
        self._queue = collections.deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # a request came, or close()
        self._room = threading.Condition(self._lock)  # the queue shrank
        self._closed = False
        self.stats = {"requests": 0, "runs": 0, "rows": 0, "retried_alone": 0}
        self._worker = threading.Thread(target=self._serve, name="kiln-batcher", daemon=True)
        self._worker.start()

    # -- submitting ---------------------------------------------------------

    def submit(self, feeds, timeout=None):
        """Queues one request ({input name: array}, or a list in the model's
        input order) and returns a concurrent.futures.Future of its outputs
        (a list of arrays, its rows of each)."""
        if not isinstance(feeds, dict):
            feeds = {info.name: a for info, a in zip(self._model.inputs, feeds)}
        feeds = {name: np.asarray(a) for name, a in feeds.items()}
        rows = {a.shape[0] if a.ndim else None for a in feeds.values()}
        if len(rows) != 1 or None in rows:
            future = concurrent.futures.Future()
            future.set_exception(ValueError(
                "every input of a request needs the same first (batch) dim, got shapes " +
                ", ".join(f"{n}: {list(a.shape)}" for n, a in feeds.items())))
            return future
        request = _Request(feeds, rows.pop(), _signature(feeds))
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while not self._closed and len(self._queue) >= self._max_queue:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise QueueFull(f"the batcher's queue of {self._max_queue} requests is full")
                self._room.wait(left)
            if self._closed:
                raise Closed("the batcher is closed")
            self._queue.append(request)
            self.stats["requests"] += 1
            self._arrived.notify()
        return request.future

    def run(self, feeds, timeout=None):
        """submit(feeds) and wait for its outputs; raises its error."""
        return self.submit(feeds, timeout).result()

    def close(self):
        """Takes no more requests; those queued are still answered."""
        with self._lock:
            self._closed = True
            self._arrived.notify_all()
            self._room.notify_all()
        self._worker.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the worker ---------------------------------------------------------

    def _take_batch(self):
        """The oldest request and those that can join it, waiting up to
        max_delay for more; None once closed and empty."""
        with self._lock:
            while not self._queue and not self._closed:
                self._arrived.wait()
            if not self._queue:
                return None
            first = self._queue[0]
            until = first.arrived + self._max_delay
            while not self._closed:
                rows = sum(r.rows for r in self._queue if r.key == first.key)
                left = until - time.monotonic()
                if rows >= self._max_batch or left <= 0:
                    break
                self._arrived.wait(left)
            batch, rows, kept = [], 0, collections.deque()
            for r in self._queue:
                if r.key == first.key and (not batch or rows + r.rows <= self._max_batch):
                    batch.append(r)
                    rows += r.rows
                else:
                    kept.append(r)
            self._queue = kept
            self._room.notify_all()
            return batch

    def _serve(self):
        while True:
            batch = self._take_batch()
            if batch is None:
                return
            # A cancelled future wants no answer (and cannot take one).
            batch = [r for r in batch if r.future.set_running_or_notify_cancel()]
            if not batch:
                continue
            try:
                self._run(batch)
            except Exception as error:  # noqa: BLE001 - each request gets its own
                if len(batch) == 1:
                    batch[0].future.set_exception(error)
                    continue
                # Retried alone, so that a bad request fails only itself.
                self.stats["retried_alone"] += len(batch)
                for r in batch:
                    try:
                        self._run([r])
                    except Exception as alone:  # noqa: BLE001
                        r.future.set_exception(alone)

    def _run(self, batch):
        if len(batch) == 1:
            feeds = batch[0].feeds
        else:
            feeds = {name: np.concatenate([r.feeds[name] for r in batch])
                     for name in batch[0].feeds}
        outputs = self._model.run(self._output_names, feeds)
        total = sum(r.rows for r in batch)
        self.stats["runs"] += 1
        self.stats["rows"] += total
        if len(batch) > 1:
            for k, y in enumerate(outputs):
                if np.ndim(y) == 0 or y.shape[0] != total:
                    raise ValueError(
                        f"output {k} has shape {list(np.shape(y))}, not {total} rows: the model's "
                        "outputs must be batched along their first dim as its inputs are")
        start = 0
        for r in batch:
            if len(batch) == 1:
                r.future.set_result(list(outputs))
            else:
                # Copies: a request's rows must not keep the batch's buffers alive.
                r.future.set_result([np.array(y[start:start + r.rows]) for y in outputs])
            start += r.rows
