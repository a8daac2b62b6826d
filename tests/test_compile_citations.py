"""Lesson 13 quotes torch's own sources on CUDA graphs, which no CPU can run: each quote must be
in the installed torch, word for word (whitespace aside), so a torch that rewords or drops one
fails here before the lesson misquotes it."""

import inspect
import re

import pytest
import torch

QUOTES = {  # module whose source holds the text → what lesson 13 quotes or restates from it
    "torch._inductor.cudagraph_trees": [  # the error texts the lesson quotes word for word
        "clone the tensor outside of torch.compile() or call "
        "torch.compiler.cudagraph_mark_step_begin() before each model invocation",
        "allocate stable .grad buffers outside CUDAGraph capture before the compiled backward "
        "runs, for example by running an eager warmup iteration or by preallocating zeroed .grad "
        "tensors",
    ],
    # restated, not quoted: a compiled step copies unmarked .grad tensors; mark_static_address
    # with guard=True recompiles on a new address, with guard=False a CUDA graph re-records
    "torch._dynamo.variables.optimizer": ["will be copied during cudagraphs execution"],
    "torch._dynamo.decorators": [
        "a full recompile if the data_ptr changes",
        "cudagraphs will re-record",
    ],
}


def _flat(text: str) -> str:
    # a quote may be split over source lines and string literals: compare the words only
    return re.sub(r"[\s\"']+", " ", text)


@pytest.mark.parametrize("module", sorted(QUOTES))
def test_lesson_13_quotes_are_in_the_installed_torch(module):
    import importlib

    source = _flat(inspect.getsource(importlib.import_module(module)))
    for quote in QUOTES[module]:
        assert _flat(quote) in source, f"{quote!r} not in {module} (torch {torch.__version__})"


def test_the_lesson_quotes_them():
    import json
    from pathlib import Path

    lesson = Path(__file__).parents[1] / "notebooks" / "13_compile_and_batch_size.ipynb"
    cells = json.loads(lesson.read_text())["cells"]
    # found by content, not by cell index: the CUDA-graph box may move
    box = [
        "".join(c["source"])
        for c in cells
        if c["cell_type"] == "markdown" and "cudagraph_trees.py" in "".join(c["source"])
    ]
    assert len(box) == 1, (
        "lesson 13 has one markdown cell citing torch/_inductor/cudagraph_trees.py"
    )
    prose = _flat(box[0].replace("\n> ", "\n"))  # a quote may run over the box's line prefixes
    for quote in QUOTES["torch._inductor.cudagraph_trees"]:
        assert _flat(quote) in prose, f"{quote!r} not quoted in the lesson's CUDA-graph box"
