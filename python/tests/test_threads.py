"""Threads: compute calls release the GIL (another thread runs Python meanwhile), a session used
from two threads at once raises SessionBusyError instead of racing, and sessions of one model run in
parallel threads with the results of a sequential run."""
import threading
import time

import numpy as np
import pytest

import statelm

LONG = [(i * 7) % 300 + 7 for i in range(2000)]  # a prefill of a few hundred ms on the tiny gemma3


def test_gil_released_during_compute(models):
    s = statelm.Session(models["gemma3"], n_ctx=2048, n_threads=1)
    window = []

    def work():
        window.append(time.perf_counter())
        s.prefill(LONG)  # one C call
        window.append(time.perf_counter())

    stamps = []
    th = threading.Thread(target=work)
    th.start()
    while th.is_alive():
        stamps.append(time.perf_counter())
    th.join()
    t0, t1 = window
    assert t1 - t0 > 0.05
    # Holding the GIL, the call would leave this thread no bytecode between entering and leaving
    # C; GIL hand-overs (every 5 ms) may fall just before and after it, so count the middle half:
    # held, it has no stamp at all; released, any. (Not a count: on a loaded machine this thread
    # may get few slices of a core.)
    q = (t1 - t0) / 4
    middle = [t for t in stamps if t0 + q < t < t1 - q]
    assert len(middle) > 0, f"no iteration of the other thread during {t1 - t0:.3f} s of compute"
    s.close()


def test_one_thread_at_a_time(models):
    # This thread must look while the other one's prefill runs; on a loaded machine it may not get
    # a core in time, so a call it missed is tried again on a fresh session (at most 10 times).
    seen_busy = False
    for _attempt in range(10):
        s = statelm.Session(models["gemma3"], n_ctx=2048, n_threads=1)
        errors = []

        def work():
            try:
                s.prefill(LONG)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        th = threading.Thread(target=work)
        th.start()
        while th.is_alive():
            try:
                s.pos
            except statelm.SessionBusyError:
                seen_busy = True
                break
        if seen_busy:
            for call in (lambda: s.decode(5), lambda: s.logits, lambda: s.snapshot(), s.close,
                         lambda: statelm.Sampler().sample(s), lambda: s.rollback(0)):
                with pytest.raises(statelm.SessionBusyError, match="one thread at a time"):
                    call()
        th.join()
        assert not errors
        assert s.pos == len(LONG) and s.history == LONG  # the running call was not disturbed
        s.close()
        if seen_busy:
            break
    assert seen_busy


def test_sessions_in_parallel(models):
    m = models["lfm2"]
    prompts = [[1, 89 + i, 95, 89] for i in range(4)]

    def run(prompt):
        with statelm.Session(m, n_ctx=64, n_threads=1) as s:
            return [t.id for t in m.generate(prompt, 20, session=s, stop_at_eog=False)]

    want = [run(p) for p in prompts]
    got = [None] * 4

    def worker(i):
        got[i] = run(prompts[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want


def test_shared_model_session_busy(models):
    """generate() on the model's own session from two threads: one may get SessionBusyError, none
    crashes, and every finished result is the sequential one."""
    m = models["qwen3"]
    want = [t.id for t in m.generate([1, 89, 95], 40, stop_at_eog=False)]
    results, errors = [], []

    def worker():
        for _ in range(5):
            try:
                results.append([t.id for t in m.generate([1, 89, 95], 40, stop_at_eog=False)])
            except statelm.SessionBusyError as e:
                errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results and all(r == want for r in results)
    assert len(results) + len(errors) == 15
