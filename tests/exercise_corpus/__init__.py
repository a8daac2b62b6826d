"""Answers every exercise checker is tried with (tests/test_exercises.py).

One module per lesson, `lessonNN.py`, holding three dicts keyed by exercise id ("NN.m"):

- `RIGHT`: `[(label, answer), ...]` — other right answers than the canonical one in
  `solutions/lessonNN.py`: another correct algorithm, the number as a person types it (an int, a
  numpy scalar, a 0-d tensor, rounded to the digits the exercise asks for).
- `WRONG`: `[(label, answer), ...]` — plausible wrong answers: the one that skips the technique
  the exercise teaches, the one that calls accumlab's own implementation, the number a common
  mistake gives. Each must get a hint, never "correct" and never "not answered yet".
- `STUBS`: `[(label, stub), ...]` — unanswered cells in the shape the lesson hands out (a function
  whose body is `...`, a class whose methods raise NotImplementedError); each must read "not
  answered yet".

With the canonical solution and the wrong answer in `solutions/`, every exercise needs at least
two right and two wrong answers in all.
"""
