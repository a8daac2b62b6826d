"""Lesson 08's "spot the bug" gallery: catalogue loops under neutral labels (Loop A, B, ...),
shown without the function's name and without comments, so nothing names the bug before the
learner has predicted it and run the audit; `.name` reveals it afterwards. Loops A-H are the
gallery; I-K, the lesson's loops that treat an epoch's short last window three more ways; L and M,
two bugs that hide (section 4)."""

from __future__ import annotations

import inspect
import io
import re
import tokenize
from dataclasses import dataclass

from .._validate import one_of
from .catalogue import CATALOGUE, CatalogueLoop
from .findings import AuditReport

GALLERY = {
    "A": "loss_not_divided",
    "B": "zero_grad_inside_window",
    "C": "off_by_one_schedule",
    "D": "last_window_carried",
    "E": "mean_of_means",
    "F": "clip_every_micro_batch",
    "G": "scaler_step_skipped",
    "H": "loss_divided_twice",
    "I": "last_window_dropped",
    "J": "windows_across_epochs",
    "K": "count_across_epochs",
    # section 4's loops, shown as blind as the gallery's under their prompts
    "L": "zero_grad_and_undivided",
    "M": "undivided_under_clipping",
}


def blind_source(fn) -> str:
    """`fn`'s source without comments, its name replaced by `train_epoch` (a class's by
    `TrainEpochs`): the code a learner reads without a hint of the bug's name."""
    source = inspect.getsource(fn)
    comments = {
        tok.start[0]: tok.start[1]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    lines = []
    for number, line in enumerate(source.splitlines(), 1):
        if number in comments:
            line = line[: comments[number]].rstrip()
            if not line.strip():
                continue  # a line that only held a comment
        lines.append(line)
    text = "\n".join(lines) + "\n"
    text = re.sub(r"^def \w+\(", "def train_epoch(", text, count=1, flags=re.MULTILINE)
    return re.sub(r"^class \w+", "class TrainEpochs", text, count=1, flags=re.MULTILINE)


@dataclass(frozen=True, repr=False)
class GalleryLoop:
    """A catalogue loop under a neutral label: `.source` (blind), `.audit()`, `.name` (the
    catalogue's name, which says what the bug is)."""

    label: str
    entry: CatalogueLoop

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def fn(self):
        return self.entry.fn

    @property
    def source(self) -> str:
        return blind_source(self.entry.fn)

    def audit(self) -> AuditReport:
        return self.entry.audit()

    def _repr_markdown_(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.entry.options.items())
        on = f"setup `{self.entry.setup}`" + (f", with {opts}" if opts else "")
        return f"**Loop {self.label}** ({on})\n\n```python\n{self.source}```"

    def __repr__(self) -> str:  # a text front end sees the blind code too, never the name
        return f"Loop {self.label} (setup {self.entry.setup!r})\n{self.source}"


def gallery_loop(label: str) -> GalleryLoop:
    """Loop `label` ("A" to "M") of lesson 08, shown without its name."""
    one_of("label", label, GALLERY)
    return GalleryLoop(label, CATALOGUE[GALLERY[label]])
