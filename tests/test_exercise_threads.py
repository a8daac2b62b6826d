"""A thread started before al.check is not watched (a profile function reaches only threads
started after it): a check that watches what the answer runs refuses while one runs learner code,
and runs as usual once it has ended."""

import importlib.util
import queue
import threading
import types
from pathlib import Path

import accumlab as al


def _solution(lesson: str, id_: str):
    path = Path(__file__).resolve().parents[1] / "solutions" / f"{lesson}.py"
    spec = importlib.util.spec_from_file_location(f"solutions_{lesson}_threads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SOLUTIONS[id_]


def test_a_worker_started_before_the_check_is_refused_then_the_check_runs():
    jobs, results = queue.Queue(), queue.Queue()

    def worker():  # the learner's code, waiting for work: it would call the refused schedule
        while (job := jobs.get()) is not None:
            step, b, k = job
            schedule = al.bookkeeping.step_schedule(b, k, 8, "per_epoch")
            results.put(schedule.position_after(step))

    def through_the_worker(step, b, k):
        jobs.put((step, b, k))
        return results.get(timeout=10)

    thread = threading.Thread(target=worker, name="learner-worker", daemon=True)
    thread.start()
    try:
        result = al.check("10.3", through_the_worker)
        assert not result.ok and "learner-worker" in result.message, result.message
        assert "started before al.check" in result.message
    finally:
        jobs.put(None)
        thread.join(timeout=10)
    assert al.check("10.3", _solution("lesson10", "10.3")).ok  # no thread left: checked as usual


def test_a_kernels_own_threads_run_library_code_only():
    from accumlab.exercises._code_guard import unwatched_threads

    idle = threading.Event()
    library = threading.Thread(target=idle.wait, name="library-wait", daemon=True)
    library.start()  # threading.Event.wait: the standard library's code only
    try:
        assert "library-wait" not in unwatched_threads()
    finally:
        idle.set()
        library.join(timeout=10)


def test_a_pool_started_before_the_check_cannot_run_the_lessons_schedule_unseen():
    """An idle pool's threads run library code only, so they are not refused; what the answer
    hands them is: the refused functions are guarded in every thread (their code is swapped)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pool.submit(int).result()  # the worker exists before the check

        def through_the_pool(step, b, k):
            schedule = pool.submit(al.bookkeeping.step_schedule, b, k, 8, "per_epoch").result()
            return pool.submit(schedule.position_after, step).result()

        def checkers_own(step, b, k):
            from accumlab.exercises import lesson10

            return pool.submit(lesson10._true_position, step, b, k).result()

        # a copy of the schedule's function made before the check keeps its original code,
        # which the guard never swaps: only the profile, set in the pool's worker too, sees it
        f = al.bookkeeping.step_schedule
        copied = types.FunctionType(f.__code__, f.__globals__, "mine", f.__defaults__)

        def a_copy_through_the_pool(step, b, k):
            schedule = pool.submit(copied, b, k, step // max(1, b // k) + 2, "per_epoch").result()
            return 0 if step == 0 else schedule.windows[step - 1][-1] + 1

        for answer in (through_the_pool, checkers_own, a_copy_through_the_pool):
            result = al.check("10.3", answer)
            assert not result.ok and "write it yourself" in result.message, result.message


def test_a_thread_started_with__thread_is_seen_too():
    """threading.enumerate() does not list a thread started with _thread.start_new_thread: the
    scan reads every running thread's frames instead."""
    import _thread
    import time

    from accumlab.exercises._code_guard import unwatched_threads

    stop = threading.Event()

    def learners_worker():  # this file is outside the library: the learner's code
        while not stop.is_set():
            time.sleep(0.01)

    _thread.start_new_thread(learners_worker, ())
    try:
        deadline = time.monotonic() + 5
        while not any("_thread" in name for name in unwatched_threads()):
            assert time.monotonic() < deadline, "the _thread worker was never seen"
            time.sleep(0.01)
        result = al.check("10.3", lambda step, b, k: 0)
        assert not result.ok and "started before al.check" in result.message, result.message
    finally:
        stop.set()
        deadline = time.monotonic() + 5  # gone before the next test checks anything
        while any("_thread" in name for name in unwatched_threads()):
            assert time.monotonic() < deadline, "the _thread worker did not stop"
            time.sleep(0.01)
