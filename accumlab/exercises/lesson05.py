"""Lesson 05 exercises: the optimizer state of a 16-bit model, choosing k from the two moments of a
step, and a loop that keeps no graph alive."""

from __future__ import annotations

import copy

import torch

from . import exercise
from ._answers import Hint, compare, integer, integers, number
from ._calls import audit_loops
from ._graph_watch import GraphsReferenced, OutputGradients, _recomputing, _reentrant_rerun
from ._observe import Observe, Refuse, forwards_phrase

# 05.1: a model of 3,000,000 bfloat16 parameters, Adam with amsgrad=True: exp_avg, exp_avg_sq and
# max_exp_avg_sq are zeros_like(param) (three buffers: no common wrong reasoning lands on 6 B/param)
PARAMS_05_1 = 3_000_000
# 05.2's numbers, given in the notebook
FLOOR = 3_000_000  # bytes during optimizer.step(): parameters, gradients, state, step temporaries
RESTING_WITH_GRADS = 2_400_000  # bytes during a forward: the same less the step's temporaries
PER_SAMPLE = 40_000  # bytes one sample adds while its micro-batch is on the device
BUDGET = 5_000_000
GLOBAL_BATCH = 192


@exercise("05.1", 1, "AMSGrad's state for a 16-bit model")
def adam_state(answer):
    two_bytes = 2 * PARAMS_05_1
    expected = 3 * two_bytes
    wrong = {
        3 * 4 * PARAMS_05_1: "the buffers are created with torch.zeros_like(param): which "
        "dtype do they get for bfloat16 parameters?",
        2 * two_bytes: "that is Adam's two buffers; amsgrad=True keeps a third, max_exp_avg_sq",
        two_bytes: "that is one buffer; AMSGrad keeps exp_avg, exp_avg_sq and max_exp_avg_sq",
        5 * two_bytes: "only the three buffers are the optimizer's state: the parameters "
        "and their .grad are not",
        # 8 bytes per parameter: two float32 moments, or the three buffers with .grad counted
        4 * two_bytes: "that is 8 bytes per parameter: which tensors are the optimizer's state, "
        "and which dtype does torch.zeros_like(param) give them?",
    }
    try:
        value = number(answer)
    except Hint:
        value = None
    if value is not None and value != expected and value not in wrong:
        integer(answer)  # a byte count is a whole number
        if abs(value - expected) <= 1e-3 * expected:  # "more digits" means nothing for a count
            # close, but how close is not said: the gap would be the answer, one subtraction away
            raise Hint(
                "close, but a byte count is exact: every buffer holds a whole number of "
                "elements of a whole number of bytes — count each buffer again"
            )
    return compare(
        answer,
        expected,
        abs=0,  # a byte count is exact
        wrong=wrong,
        otherwise="three buffers per parameter, each the shape and dtype of the parameter",
    )


def _largest(room: int) -> int:
    """The largest divisor of the global batch whose samples fit in `room` bytes."""
    return max(
        m for m in range(1, GLOBAL_BATCH + 1) if GLOBAL_BATCH % m == 0 and m * PER_SAMPLE <= room
    )


@exercise("05.2", 2, "Choose the micro-batch size and k from the two moments")
def choose(answer):
    mb, k = integers(answer, 2)
    if mb < 1 or k < 1:
        raise Hint(f"a micro-batch size and k are at least 1, got ({mb}, {k})")
    if mb * k != GLOBAL_BATCH:
        raise Hint(
            f"micro_batch_size × k must equal the global batch of {GLOBAL_BATCH}, got {mb * k}"
        )
    best = _largest(BUDGET - RESTING_WITH_GRADS)
    if (k, mb) == (best, GLOBAL_BATCH // best) and k != mb:
        raise Hint("the pair is (micro_batch_size, k), in that order")
    need = RESTING_WITH_GRADS + mb * PER_SAMPLE
    if need > BUDGET:
        raise Hint(
            f"during a forward, {mb} samples need {RESTING_WITH_GRADS:,} + {mb} × {PER_SAMPLE:,} = "
            f"{need:,} bytes, over the budget"
        )
    if mb == _largest(BUDGET - FLOOR) < _largest(BUDGET - RESTING_WITH_GRADS):
        raise Hint(
            "it fits, but so does a larger micro-batch: the step's temporaries exist only during "
            "optimizer.step(), when no micro-batch's data or activations do — check each of the "
            "two moments against the budget on its own"
        )
    if mb < _largest(BUDGET - RESTING_WITH_GRADS):
        raise Hint(
            "it fits, but a larger micro-batch also fits: fewer, larger micro-batches use the "
            "hardware better"
        )
    return None


def _task():
    from ..data import regression_data
    from ..models import mlp

    model = mlp(features=8, hidden=32, outputs=1, depth=2, seed=1, dtype=torch.float64)
    data = regression_data(n=32, features=8, outputs=1, seed=1, dtype=torch.float64)
    return model, data


def _one_micro_batch_saved(model, micro) -> int:
    """Bytes autograd saves for one micro-batch's forward and loss (parameters excluded)."""
    from ..saved import saved_tensor_bytes

    probe = copy.deepcopy(model)
    mb = micro[0]
    return saved_tensor_bytes(
        lambda: torch.nn.functional.mse_loss(probe(mb.x), mb.y), exclude=probe.parameters()
    )


class _GradientsIntoModel(OutputGradients):
    """The gradient that enters the model's last layer, after the tensor hooks on its output
    have run: a node pre-hook on the output's grad_fn runs after them. A right answer may apply
    the ÷ k in a hook on the output (`out.register_hook(lambda g: g / k)`), and what its backward
    then carries into the model is the mean loss's gradient."""

    def _exit(self, module, args, output) -> None:
        if _recomputing() and not _reentrant_rerun():
            return
        if not self.passes or not isinstance(output, torch.Tensor) or output.grad_fn is None:
            return
        record = self.passes[-1]
        record.update(out=output.detach().clone(), grad=torch.zeros_like(output))
        slot = output.output_nr

        def arrived(grad_outputs, record=record, slot=slot):
            if grad_outputs[slot] is not None:
                record["grad"] = record["grad"] + grad_outputs[slot].detach()

        output.grad_fn.register_prehook(arrived)


_UNPACK = ("unpack", "not iterable")
INTERFACE = (
    "micro_batches is a list of al.Data, one per micro-batch: use mb.x (inputs) and mb.y "
    "(targets) — `for mb in micro_batches: ... model(mb.x) ... mb.y`"
)


@exercise("05.3", 3, "Accumulate without keeping graphs alive")
def accumulate_lean(answer):
    from ..reference import full_batch_grads

    if not callable(answer):
        raise Hint("give a function accumulate(model, micro_batches)")
    model, data = _task()
    micro = data.micro_batches(8)
    one = _one_micro_batch_saved(model, micro)
    mine = copy.deepcopy(model)
    refused = (
        "al.accumulated_grads", "al.full_batch_grads", "al.run", "al.memory.train_step",
        *audit_loops(),  # lesson 08's loops: several are this one with a do-nothing extra
    )  # fmt: skip
    try:
        with (
            Refuse(*refused),
            Observe(mine, inputs=True) as seen,
            GraphsReferenced(mine) as referenced,
            _GradientsIntoModel(mine) as arrived,
        ):
            result = answer(mine, list(micro))  # its own list: it may consume it
    except (TypeError, ValueError) as err:
        if any(word in str(err) for word in _UNPACK):
            raise Hint(f"{INTERFACE} (your answer raised {type(err).__name__}: {err})") from None
        raise
    if isinstance(result, torch.Tensor) and result.grad_fn is not None:
        raise Hint(
            "return a number, not a tensor with a graph: it keeps its graph, and every graph it "
            "was added to, alive (loss.item() gives the number)"
        )
    try:
        value = number(result)
    except Hint as hint:
        # a number of the wrong kind (NaN, complex) keeps the reader's own reason
        import numbers

        if isinstance(result, numbers.Number) or hasattr(result, "dtype"):  # numpy, tensors
            raise Hint(f"the mean loss you returned: {hint}") from None
        raise Hint(
            f"return the mean loss over all micro-batches as a number, got {type(result).__name__}"
        ) from None
    if seen.reentrant:  # its forwards and backwards run inside backward, where the hooks differ
        raise Hint(
            "your answer used torch.utils.checkpoint(use_reentrant=True): its forward runs "
            "without a graph and reruns inside backward, with a backward of its own, and this "
            "check does not follow those. Use use_reentrant=False (torch's recommended setting)"
        )
    graph_rows = [c.rows for c in seen.forwards if c.graph]  # a no_grad forward (a log) is free
    without = sum(not c.graph for c in seen.forwards)
    if graph_rows != [8] * 4 and without and seen.rows == [8] * 4:
        raise Hint(
            f"{without} of your 4 forwards ran without recording a graph (under torch.no_grad()?): "
            "each micro-batch's gradient comes from the backward of its own forward"
        )
    if graph_rows != [8] * 4:
        raise Hint(
            f"your answer ran {forwards_phrase(graph_rows)} with a graph; accumulation runs "
            f"{forwards_phrase([8] * 4)}, one per micro-batch"
        )
    fed = seen.fed(micro)
    if fed:
        raise Hint(f"{fed}: each forward takes one micro-batch as it is, mb.x")
    # .backward() and torch.autograd.grad (its result added into .grad) both do the job
    if seen.backwards + seen.grad_only != 4:
        raise Hint(
            f"your answer ran {seen.backwards_phrase()}: a backward per micro-batch frees its "
            "graph before the next forward (4 expected)"
        )
    if seen.peak_graphs > 1:
        raise Hint(
            f"the gradient may be right, but {seen.graphs_phrase()}: one micro-batch's graph "
            "at a time is the point (is something holding a graph: a loss, an output, a grad_fn, "
            "or a .grad built with create_graph=True?)"
        )
    # one micro-batch's forward saves `one` bytes; 1.5x leaves room for another loss formula
    if seen.peak_saved_bytes > 1.5 * one:
        raise Hint(
            f"the gradient may be right, but {seen.peak_saved_bytes:,} bytes were saved for "
            f"backward at once, {seen.peak_saved_bytes / one:.1f} micro-batches' worth: each "
            "backward should use the graph of one micro-batch's forward through the model"
        )
    if referenced.peak > 2:
        raise Hint(
            f"up to {referenced.peak} micro-batches' graphs were referenced at once: backward freed "
            "their saved tensors, but a tensor kept with its graph (a loss or an output in a list "
            "or a running total, a grad_fn) keeps every autograd node behind it alive until the "
            "loop ends (keep numbers: loss.item(), or tensors .detach()ed)"
        )
    with torch.no_grad():
        full_loss = float(torch.nn.functional.mse_loss(model(data.x), data.y))
    if 1e-9 < abs(value - full_loss) <= 1e-6 * abs(full_loss):
        raise Hint(
            f"close: {value!r} is within a relative 1e-6 of the mean loss, but it is checked to "
            "1e-9 (the model and data are float64): a float32 running total, such as "
            "torch.zeros(()), rounds it; add Python floats (loss.item()) or keep float64"
        )
    hint = compare(
        value,
        full_loss,
        rel=1e-9,
        otherwise="the returned loss should be the mean over all samples (the mean of the k "
        "micro-batch means)",
    )
    if hint:
        raise Hint(hint)
    ref = full_batch_grads(model, data, loss="mse")
    got = dict(mine.named_parameters())
    if any(got[n].grad is None for n in ref):
        raise Hint("after your function every parameter should hold a .grad")
    if not all(torch.allclose(got[n].grad, ref[n], rtol=1e-9, atol=1e-12) for n in ref):
        raise Hint(
            "the accumulated gradient differs from the full batch's (checked to a relative "
            "1e-9): what is each micro-batch's loss divided by?"
        )
    missed = arrived.wrong(micro, elements=data.y.numel())
    if missed:
        raise Hint(
            f"the gradient is right, but {missed} of the 4 micro-batches' forwards did not "
            "receive the mean loss's gradient at their output: each micro-batch's gradient must "
            "come from the backward of its own forward through the model (not from another graph), "
            "with ÷ k applied before backward reaches the model (to the loss, or to the gradient "
            "at the output)"
        )
    return None
