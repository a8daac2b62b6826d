"""Every exercise's checker accepts its solution and rejects a wrong answer and a blank one."""

import importlib.util
from pathlib import Path

import pytest

import accumlab as al
from accumlab import exercises

SOLUTIONS_DIR = Path(__file__).resolve().parents[1] / "solutions"


def _solutions(lesson: str) -> tuple[dict, dict]:
    path = SOLUTIONS_DIR / f"lesson{lesson}.py"
    if not path.exists():
        pytest.fail(f"exercises of lesson {lesson} have no solutions file {path}")
    spec = importlib.util.spec_from_file_location(f"solutions_lesson{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SOLUTIONS, module.WRONG


ALL = exercises.all_exercises()


@pytest.mark.parametrize("ex", ALL, ids=[e.id for e in ALL])
def test_solution_passes_and_wrong_answer_fails(ex):
    solutions, wrong = _solutions(ex.id[:2])
    assert ex.id in solutions, f"no solution for {ex.id}"
    assert ex.id in wrong, f"no wrong answer for {ex.id}: a checker must be shown to fail"
    assert al.check(ex.id, solutions[ex.id]).ok, al.check(ex.id, solutions[ex.id]).message
    result = al.check(ex.id, wrong[ex.id])
    assert not result.ok and "Hint:" in result.message
    assert not al.check(ex.id, None).ok


def test_every_lesson_with_exercises_has_two_to_four():
    by_lesson: dict[str, int] = {}
    for ex in ALL:
        by_lesson[ex.id[:2]] = by_lesson.get(ex.id[:2], 0) + 1
    for lesson, n in by_lesson.items():
        assert 2 <= n <= 4, f"lesson {lesson} has {n} exercises"


def test_unknown_exercise_is_a_clear_error():
    with pytest.raises(ValueError, match="'02.99'"):
        al.check("02.99", 1)
    with pytest.raises(ValueError, match="look like"):
        al.check("lesson2", 1)


def test_answer_that_raises_becomes_a_hint():
    ex = ALL[0]

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    result = al.check(ex.id, broken)
    assert not result.ok
