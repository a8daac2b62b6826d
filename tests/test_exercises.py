"""Every exercise checker, tried with the answers in tests/exercise_corpus/ and solutions/: right
answers in several forms pass, plausible wrong answers get a hint, stubs read "not answered yet"."""

import functools
import importlib.util
from pathlib import Path

import pytest

import accumlab as al
from accumlab import exercises

SOLUTIONS_DIR = Path(__file__).resolve().parents[1] / "solutions"
CORPUS_DIR = Path(__file__).resolve().parent / "exercise_corpus"
NOT_YET = "not answered yet"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _cases(lesson: str) -> tuple[dict, dict, dict]:
    """(right, wrong, stubs): id -> [(label, answer)], the solutions file's first."""
    path = SOLUTIONS_DIR / f"lesson{lesson}.py"
    if not path.exists():
        pytest.fail(f"exercises of lesson {lesson} have no solutions file {path}")
    solutions = _load(path, f"solutions_lesson{lesson}")
    corpus_path = CORPUS_DIR / f"lesson{lesson}.py"
    corpus = _load(corpus_path, f"corpus_lesson{lesson}") if corpus_path.exists() else None
    right, wrong, stubs = {}, {}, {}
    for id_, answer in solutions.SOLUTIONS.items():
        right.setdefault(id_, []).append(("solutions/ SOLUTIONS", answer))
    for id_, answer in solutions.WRONG.items():
        wrong.setdefault(id_, []).append(("solutions/ WRONG", answer))
    for name, into in (("RIGHT", right), ("WRONG", wrong), ("STUBS", stubs)):
        for id_, entries in getattr(corpus, name, {}).items():
            for label, answer in entries:
                into.setdefault(id_, []).append((label, answer))
    return right, wrong, stubs


ALL = exercises.all_exercises()
IDS = [e.id for e in ALL]


def _entries(kind: int) -> list:
    params = []
    for ex in ALL:
        for label, answer in _cases(ex.id[:2])[kind].get(ex.id, []):
            params.append(pytest.param(ex.id, answer, id=f"{ex.id}-{label}"))
    return params


@pytest.mark.parametrize("id_, answer", _entries(0))
def test_right_answer_passes(id_, answer):
    result = al.check(id_, answer)
    assert result.ok, result.message


@pytest.mark.parametrize("id_, answer", _entries(1))
def test_wrong_answer_gets_a_hint(id_, answer):
    result = al.check(id_, answer)
    assert not result.ok, f"a wrong answer was graded correct: {result.message}"
    assert "Hint:" in result.message and NOT_YET not in result.message, result.message


# the generic stubs every exercise must call unanswered, whatever the answer's shape
def _stub_function(*args, **kwargs): ...


class _StubClass:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError


class _StubCallable:
    def __call__(self, *args, **kwargs): ...


async def _stub_coroutine(*args, **kwargs):
    pass


GENERIC_STUBS = [
    ("None", None),
    ("Ellipsis", ...),
    ("function", _stub_function),
    ("class", _StubClass),
    ("instance", _StubCallable()),  # an instance whose __call__ is a stub
    ("async", _stub_coroutine),
    ("partial", functools.partial(_stub_function, 1)),
]


async def _async_answer(*args, **kwargs):
    return 3


@pytest.mark.parametrize("id_", ["03.1", "07.3", "10.3", "13.1"])
def test_async_answer_is_told_to_use_def(id_):
    result = al.check(id_, _async_answer)
    assert not result.ok and "not async def" in result.message, result.message


@pytest.mark.parametrize("id_", IDS)
@pytest.mark.parametrize("label, stub", GENERIC_STUBS, ids=[s[0] for s in GENERIC_STUBS])
def test_generic_stub_is_not_answered_yet(id_, label, stub):
    result = al.check(id_, stub)
    assert not result.ok and NOT_YET in result.message, result.message


@pytest.mark.parametrize("id_, answer", _entries(2))
def test_lesson_stub_is_not_answered_yet(id_, answer):
    result = al.check(id_, answer)
    assert not result.ok and NOT_YET in result.message, result.message


def test_every_exercise_has_two_right_and_two_wrong_answers():
    missing = []
    for ex in ALL:
        right, wrong, _ = (cases.get(ex.id, []) for cases in _cases(ex.id[:2]))
        if len(right) < 2 or len(wrong) < 2:
            missing.append(f"{ex.id}: {len(right)} right, {len(wrong)} wrong")
    assert not missing, "exercises needing more answers in tests/exercise_corpus/: " + "; ".join(
        missing
    )


def test_corpus_names_only_exercises_that_exist():
    for path in sorted(CORPUS_DIR.glob("lesson*.py")):
        lesson = path.stem.removeprefix("lesson")
        for kind in _cases(lesson):
            unknown = set(kind) - set(IDS)
            assert not unknown, f"{path.name} names exercises that do not exist: {sorted(unknown)}"


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
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    result = al.check("02.2", broken)  # an exercise whose checker calls the answer
    assert not result.ok and "RuntimeError" in result.message


def _named_hints() -> list:
    params = []
    for path in sorted(CORPUS_DIR.glob("lesson*.py")):
        if path.stem == "lesson13":  # its 13.2 hints are checked in tests/test_scale.py
            continue
        corpus = _load(path, f"corpus_hints_{path.stem}")
        wrong = {
            label: (id_, answer)
            for id_, entries in corpus.WRONG.items()
            for label, answer in entries
        }
        for label, says in getattr(corpus, "HINTS", {}).items():
            params.append(pytest.param(*wrong[label], says, id=f"{path.stem}-{label}"))
    return params


@pytest.mark.parametrize("id_, answer, says", _named_hints())
def test_wrong_answer_gets_the_hint_naming_its_mistake(id_, answer, says):
    """A corpus's HINTS: the words the hint of each listed wrong answer must contain."""
    result = al.check(id_, answer)
    assert not result.ok and says in result.message, result.message
