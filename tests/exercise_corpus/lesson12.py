"""Lesson 12: right, wrong and unanswered answers for its exercises (see __init__.py)."""

RIGHT: dict = {}
WRONG: dict = {}
STUBS: dict = {}
