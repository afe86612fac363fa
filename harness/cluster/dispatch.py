"""The batch dispatcher every ``--cluster`` command shares.

The coordinator splits its planned cases (keys: pytest node ids, stress ``test#index``, fuzz
index ranges) into batches and submits each as one Dask task.  A task runs its cases on its
worker and sends their rows back twice: as they finish, as worker events (``log_event`` on a
topic of this run), and all of them in its result.  ``accept`` writes a row once, whichever
copy arrives first, so a row finished on a worker that then dies is already in the journal.

A lost batch (its worker died or disconnected, or the task raised): the cases without a row
are queued again once as a batch; lost again, they are split into single cases (a case that
kills its worker is then alone), and a single case lost at that point is given to
``lost_case`` (a CRASH row naming the worker).  Every planned case ends with exactly one row.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, cast

from nnconform.isolation import interrupts

FIRST, REQUEUED, SPLIT = 0, 1, 2
MAX_BOUNCES = 5
# How long a run waits for its client to reconnect to a lost scheduler before it ends as
# interrupted (nnconform run --cluster-grace): a scheduler restarted on the same address
# within this time finishes the run; one that is gone for good costs this wait, then --resume.
DISCONNECT_GRACE_S = 60.0


@dataclass
class Batch:
    keys: list[str]
    attempt: int = FIRST
    id: int = 0
    bounced: int = 0  # times lost before it started (another batch killed its worker)


@dataclass
class DispatchStats:
    planned: int = 0
    rows: int = 0
    batches: int = 0
    lost_batches: int = 0
    crashed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    first_row_s: float = 0.0  # first submit -> first row on disk (the workers' start-up)


def worker_address() -> str:
    """This task's worker address ('' outside a Dask worker)."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return ""


def send_started(topic: str | None, batch: int) -> None:
    """Tell the coordinator this batch now runs here: a batch lost before it started (queued
    on a worker that another batch killed) is queued again without counting against it."""
    if not topic:
        return
    from distributed import get_worker

    w = get_worker()
    w.log_event(topic, {"batch": batch, "started": True, "worker": str(w.address)})


def send_rows(topic: str | None, rows: list[dict], batch: int) -> None:
    """Stream finished rows to the coordinator now (a worker event on the run's topic)."""
    if not topic or not rows:
        return
    from distributed import get_worker

    w = get_worker()
    w.log_event(topic, {"batch": batch, "rows": rows, "worker": str(w.address)})


def split(keys: list[str], size: int) -> list[list[str]]:
    size = max(1, int(size))
    return [keys[i : i + size] for i in range(0, len(keys), size)]


def batch_size(n: int, slots: int, per_slot: int = 4, largest: int = 1000) -> int:
    """Cases per batch: about ``per_slot`` batches per worker thread (so a slow batch does not
    leave the others idle at the end), at most ``largest``.  Each batch is one pytest session
    on its worker (a second or more of set-up), so batches are large; a lost worker costs
    only its cases without a row, since rows stream back as they finish."""
    return max(1, min(largest, -(-n // max(1, slots * per_slot))))


class Dispatcher:
    """``fn(keys, payload, topic, batch_id) -> {"rows": [...], "error": str | None}`` runs on the
    workers (each row a dict with its case key in ``_key``); ``accept(rows, worker) -> keys written`` and ``lost_case(key, worker, why)`` run
    here (serialised by one lock, from this thread and the client's event thread)."""

    def __init__(
        self,
        handle,
        fn: Callable,
        payload: dict,
        *,
        accept: Callable,
        lost_case: Callable,
        sync: Callable[[], None] = lambda: None,
        log: Callable[[str], None] = print,
        progress_s: float = 10.0,
        disconnect_grace_s: float = DISCONNECT_GRACE_S,
    ):
        self.handle, self.fn, self.payload = handle, fn, payload
        self.accept_rows, self.lost_case, self.sync, self.log = accept, lost_case, sync, log
        # Rows arrive on the client's event thread; they are written (and fsynced, one fsync
        # for all that arrived together) on a writer thread, never blocking that loop.
        self._inbox: queue.Queue = queue.Queue()
        self._writer: threading.Thread | None = None  # start_writer()
        self._writer_error: BaseException | None = None
        self.progress_s = progress_s
        self.disconnect_grace_s = disconnect_grace_s  # a client reconnecting this long: the run ends
        self.done: set[str] = set()
        self.lock = threading.Lock()
        self.stats = DispatchStats()
        self.topic = f"nnconform-rows-{uuid.uuid4().hex}"
        self._ids = itertools.count(1)
        self._where: dict[int, str] = {}  # batch id -> the worker that runs it
        self._started: set[int] = set()  # batches whose task began on a worker
        self._t0 = time.monotonic()

    # rows ----------------------------------------------------------------------------------
    def _accept(self, rows: list[dict], worker: str, batch: int | None = None) -> None:
        self._inbox.put((rows, worker, batch))

    def _write_loop(self) -> None:
        while True:
            item = self._inbox.get()
            got = [item]
            while True:
                try:
                    got.append(self._inbox.get_nowait())
                except queue.Empty:
                    break
            try:
                if any(x is None for x in got):
                    got = [x for x in got if x is not None]
                    stop = True
                else:
                    stop = False
                with self.lock:
                    for rows, worker, batch in got:
                        if batch is not None and worker:
                            self._where[batch] = worker
                        # A batch's result repeats the rows it streamed: only the first copy
                        # of a case goes to ``accept`` (O(1) a row; the coordinator does no
                        # O(run) work per message).
                        fresh = [r for r in rows if r.get("_key") not in self.done]
                        if not fresh:
                            continue
                        written = self.accept_rows(fresh, worker) or ()
                        self.done.update(written)
                        self.stats.rows += len(written)
                    if got:
                        self.sync()  # one fsync for every chunk that arrived together
                        if self.stats.rows and not self.stats.first_row_s:
                            self.stats.first_row_s = time.monotonic() - self._t0
            except BaseException as e:
                self._writer_error = e
                stop = True
            finally:
                for _ in range(len(got) + (1 if stop and self._writer_error is None else 0)):
                    self._inbox.task_done()
            if stop:
                return

    def start_writer(self) -> None:
        # (a helper thread: it leaves Ctrl-C to the main thread, see nnconform.isolation.interrupts)
        self._writer = interrupts.thread(self._write_loop, name="nnconform-cluster-rows")

    def _settle(self) -> None:
        """Wait until every row received so far is written (before judging a batch)."""
        writer = self._writer
        assert writer is not None  # run() starts the writer before any batch is judged
        while self._inbox.unfinished_tasks and writer.is_alive():
            time.sleep(0.005)
        if self._writer_error is not None:
            raise self._writer_error

    def _on_event(self, event) -> None:
        msg = event[1] if isinstance(event, tuple) and len(event) == 2 else event
        if isinstance(msg, dict) and msg.get("started"):
            batch = cast(int, msg.get("batch"))  # a started event names its batch id
            with self.lock:
                self._started.add(batch)
                self._where[batch] = str(msg.get("worker", ""))
        elif isinstance(msg, dict) and isinstance(msg.get("rows"), list):
            self._accept(msg["rows"], str(msg.get("worker", "")), msg.get("batch"))

    # batches --------------------------------------------------------------------------------
    def _submit(self, ac, b: Batch, futures: dict) -> None:
        b.id = next(self._ids)
        kw = {"resources": dict(self.handle.resources)} if self.handle.resources else {}
        fut = self.handle.client.submit(
            self.fn,
            b.keys,
            self.payload,
            self.topic,
            b.id,
            pure=False,
            key=f"nnconform-batch-{b.id}-{uuid.uuid4().hex[:8]}",
            **kw,
        )
        futures[fut.key] = (fut, b)
        ac.add(fut)
        self.stats.batches += 1

    def _lost(self, ac, b: Batch, worker: str, why: str, futures: dict) -> None:
        self._settle()
        with self.lock:
            left = [k for k in b.keys if k not in self.done]
        if not left:
            return
        self.stats.lost_batches += 1
        where = worker or self._where.get(b.id, "") or "an unknown worker"
        with self.lock:
            started = b.id in self._started
        if not started and b.bounced < MAX_BOUNCES:
            # It never ran: the worker died with another batch.  Not this batch's doing.
            self._submit(ac, Batch(left, b.attempt, bounced=b.bounced + 1), futures)
            return
        action = (
            "queued again" if b.attempt == FIRST else "split into single cases" if len(left) > 1 else "recorded CRASH"
        )
        self.log(
            f"nnconform cluster: batch of {len(b.keys)} case(s) lost on {where} ({why}); "
            f"{len(left)} without a row: {action}"
        )
        if b.attempt == FIRST and len(left) == len(b.keys) == 1:
            self._submit(ac, Batch(left, SPLIT), futures)  # alone already: its one more run
        elif b.attempt == FIRST:
            self._submit(ac, Batch(left, REQUEUED), futures)
        elif len(left) > 1:
            for k in left:
                self._submit(ac, Batch([k], SPLIT), futures)
        else:
            with self.lock:
                if left[0] not in self.done:
                    self.lost_case(left[0], where, why)
                    self.sync()
                    self.done.add(left[0])
                    self.stats.crashed.append(left[0])
                    self.stats.rows += 1

    def run(self, batches: list[list[str]]) -> DispatchStats:
        from distributed import as_completed

        t0 = self._t0 = time.monotonic()
        self.stats.planned = sum(len(b) for b in batches)
        client = self.handle.client
        self.start_writer()
        assert self._writer is not None
        client.subscribe_topic(self.topic, self._on_event)
        futures: dict = {}
        # with_results: each finished batch's rows are fetched on the client's event loop as
        # it finishes, several at once, not one round trip after another from this thread
        # (under load those round trips were a third of a 16-worker dispatch).
        ac = as_completed(with_results=True, raise_errors=False)
        try:
            for keys in batches:
                self._submit(ac, Batch(list(keys)), futures)
            last = time.monotonic()
            for fut, res in _completed(ac, client, self.disconnect_grace_s):
                _, b = futures.pop(fut.key)
                e = _failure(res)
                if e is not None:  # a lost task is a verdict, not a crash of the run
                    self._lost(ac, b, _killed_worker(e), _why(e), futures)
                else:
                    rows = list(res.get("rows", ()))
                    self._accept(rows, str(res.get("worker", "")), b.id)
                    # A result holding a row for every case of its batch needs no wait for the
                    # writer (it writes them, fsynced, before the run ends); only a short one
                    # is judged on what is on disk.
                    got = {r.get("_key") for r in rows}
                    missing = [k for k in b.keys if k not in got]
                    if missing:
                        self._settle()
                        with self.lock:
                            missing = [k for k in b.keys if k not in self.done]
                    elif self._writer_error is not None:
                        raise self._writer_error
                    if missing:
                        self._lost(
                            ac,
                            b,
                            str(res.get("worker", "")),
                            str(res.get("error") or "the batch ended without a row for every case"),
                            futures,
                        )
                fut.release()
                if self.progress_s and time.monotonic() - last >= self.progress_s:
                    last = time.monotonic()
                    self.log(
                        f"nnconform cluster: {len(self.done)}/{self.stats.planned} cases done, "
                        f"{len(self.handle.workers())} worker(s), {time.monotonic() - t0:.0f} s"
                    )
        except BaseException:
            try:
                for fut, _ in futures.values():
                    fut.cancel()
            except Exception as e:
                self.log(f"nnconform cluster: could not cancel the unfinished batches ({type(e).__name__})")
            raise
        finally:
            self._inbox.put(None)
            self._writer.join(timeout=60)
            try:
                client.unsubscribe_topic(self.topic)
            except Exception as e:
                self.log(f"nnconform cluster: could not unsubscribe from the row stream ({type(e).__name__})")
        if self._writer_error is not None:  # a row that could not be written fails the run
            raise self._writer_error
        self.stats.seconds = time.monotonic() - t0
        return self.stats


def _completed(ac, client, grace_s: float):
    """``ac``'s (future, result) pairs as they finish, like iterating it, but a client that
    has lost its scheduler (status not "running": reconnecting, or closed) for ``grace_s``
    ends the run with a ClusterError instead of waiting forever on futures nobody will
    finish (a 16-worker run at load 36 once hung that way)."""
    from nnconform.cluster import ClusterError

    lost_since = None
    while not ac.is_empty():
        got = ac.next_batch(block=False)
        if got:
            lost_since = None
            yield from got
            continue
        status = str(getattr(client, "status", "running"))
        if status == "running":
            lost_since = None
        else:
            now = time.monotonic()
            lost_since = lost_since or now
            if status == "closed" or now - lost_since >= grace_s:
                raise ClusterError(
                    f"lost the connection to the scheduler (client {status} for "
                    f"{now - lost_since:.0f} s) with {ac.count()} batch(es) unfinished"
                )
        with ac.thread_condition:  # woken as soon as a batch finishes
            ac.thread_condition.wait(timeout=0.1)


def _failure(res) -> BaseException | None:
    """The exception of a failed task as ``as_completed(raise_errors=False)`` gives it (the
    exception, or its (type, exception, traceback)); None for a batch's result."""
    if isinstance(res, BaseException):
        return res
    if isinstance(res, tuple) and len(res) == 3 and isinstance(res[1], BaseException):
        return res[1]
    return None


def _killed_worker(e: BaseException) -> str:
    last = getattr(e, "last_worker", None)
    if last is None:
        return ""
    return str(getattr(last, "address", last))


def _why(e: BaseException) -> str:
    from distributed import KilledWorker

    if isinstance(e, KilledWorker):
        return "the worker died or disconnected while running it"
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}"[:300]
