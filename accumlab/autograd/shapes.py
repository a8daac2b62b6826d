"""What lesson 01's results look like, so its plot can say what is wrong with the rows it is handed
(a hand-built or partial list) instead of failing inside with a KeyError."""

from __future__ import annotations

from .._validate import nonempty, result

ROW = {
    "n": int,
    "summed_nodes": int,
    "summed_saved_bytes": int,
    "accumulated_nodes": int,
    "accumulated_saved_bytes": int,
    "logged_nodes": int,
    "logged_saved_bytes": int,
    "batched_nodes": int,
    "batched_saved_bytes": int,
}


def rows(name: str, value) -> list:
    return result(name, value, nonempty([ROW]), "what al.autograd.graph_growth(...) returns")
