"""Lesson 03: right, wrong and unanswered answers for its exercises (see __init__.py)."""

import copy
from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F

import accumlab as al


def _weighted_sum(model, mb, weight):
    logits = model(mb.x)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        mb.y.reshape(-1),
        weight=weight,
        ignore_index=-100,
        reduction="sum",
    )


def _summed_weight(micro_batches, weight) -> float:
    return sum(float(weight[mb.y[mb.y != -100]].sum()) for mb in micro_batches)


# --- 03.4, right: other ways to weigh every token w[y] / W ----------------------------------------


def mean_times_share(model, micro_batches, class_weight):
    """Each micro-batch's weighted MEAN times its share of the window's summed weight."""
    shares = [float(class_weight[mb.y[mb.y != -100]].sum()) for mb in micro_batches]
    for mb, share in zip(micro_batches, shares, strict=True):
        logits = model(mb.x)
        mean = F.cross_entropy(
            logits.flatten(0, 1), mb.y.flatten(), weight=class_weight, ignore_index=-100
        )
        (mean * share / sum(shares)).backward()


def weights_gathered_by_hand(model, micro_batches, class_weight):
    """log_softmax and the weights gathered by hand, the divisor kept as a tensor."""
    real = [mb.y != -100 for mb in micro_batches]
    total = torch.stack([class_weight[mb.y[r]].sum() for mb, r in zip(micro_batches, real)]).sum()
    for mb, r in zip(micro_batches, real, strict=True):
        logp = torch.log_softmax(model(mb.x), dim=-1)
        target = mb.y.clamp(min=0)
        picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        (-(picked * class_weight[target] * r).sum() / total).backward()


def sum_then_divide_grad(model, micro_batches, class_weight):
    """Backward on each weighted SUM, then divide .grad once by the summed weight."""
    for mb in micro_batches:
        _weighted_sum(model, mb, class_weight).backward()
    total = _summed_weight(micro_batches, class_weight)
    for p in model.parameters():
        p.grad /= total


# --- 03.4, wrong ------------------------------------------------------------------------------------


def as_handed_out(model, micro_batches, class_weight):
    """The cell's loop: each micro-batch's weighted mean ÷ k."""
    for mb in micro_batches:
        logits = model(mb.x)
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            mb.y.reshape(-1),
            weight=class_weight,
            ignore_index=-100,
        )
        (loss / len(micro_batches)).backward()


def by_token_count(model, micro_batches, class_weight):
    """The lesson's loop, unchanged: the weighted sum ÷ the window's real tokens."""
    total = sum(int((mb.y != -100).sum()) for mb in micro_batches)
    for mb in micro_batches:
        (_weighted_sum(model, mb, class_weight) / total).backward()


def weights_forgotten(model, micro_batches, class_weight):
    """Drops the class weights: the unweighted token mean."""
    total = sum(int((mb.y != -100).sum()) for mb in micro_batches)
    for mb in micro_batches:
        (_weighted_sum(model, mb, None) / total).backward()


def one_forward_for_all(model, micro_batches, class_weight):
    """Skips the technique: every micro-batch concatenated into one forward and one backward."""
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    logits = model(x)
    F.cross_entropy(
        logits.flatten(0, 1), y.flatten(), weight=class_weight, ignore_index=-100
    ).backward()


def copies_the_reference(model, micro_batches, class_weight):
    """Calls accumlab's own full-batch gradient and copies it into .grad."""
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    grads = al.full_batch_grads(model, al.Data(x, y), loss="cross_entropy")
    for name, p in model.named_parameters():
        p.grad = grads[name].clone()


def copies_accumulated_grads(model, micro_batches, class_weight):
    """Calls accumlab's accumulation with the global count and copies the result into .grad."""
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    grads = al.accumulated_grads(
        model, al.Data(x, y), len(micro_batches[0]), normalization="global", loss="cross_entropy"
    )
    for name, p in model.named_parameters():
        p.grad = grads[name].clone()


def one_backward_on_the_sum(model, micro_batches, class_weight):
    """Right weights, but every graph kept alive until one backward on the summed loss."""
    total = _summed_weight(micro_batches, class_weight)
    (sum(_weighted_sum(model, mb, class_weight) for mb in micro_batches) / total).backward()


def divided_by_k_too(model, micro_batches, class_weight):
    """The right divisor, then ÷ k as well: 1/k of the full-batch gradient."""
    total = _summed_weight(micro_batches, class_weight)
    for mb in micro_batches:
        (_weighted_sum(model, mb, class_weight) / total / len(micro_batches)).backward()


def autograd_grad_by_hand(model, micro_batches, class_weight):
    """Right weights, but torch.autograd.grad and hand-written .grad instead of backward."""
    total = _summed_weight(micro_batches, class_weight)
    params = list(model.parameters())
    for mb in micro_batches:
        grads = torch.autograd.grad(_weighted_sum(model, mb, class_weight) / total, params)
        for p, g in zip(params, grads, strict=True):
            p.grad = g if p.grad is None else p.grad + g


def twin_does_the_work(model, micro_batches, class_weight):
    """A fresh twin of the model takes one full-batch backward; the model runs each micro-batch
    with a backward of 0 × loss, then receives the twin's gradient."""
    twin = type(model)(vocab=12, dim=6)
    twin.load_state_dict(model.state_dict())
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    logits = twin(x)
    F.cross_entropy(
        logits.flatten(0, 1), y.flatten(), weight=class_weight, ignore_index=-100
    ).backward()
    for mb in micro_batches:
        (0 * _weighted_sum(model, mb, class_weight)).backward()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        p.grad = q.grad.clone()


def unobserved_copy_does_the_work(model, micro_batches, class_weight):
    """As above with a deepcopy whose forward hooks are cleared, and tiny backwards on the model."""
    twin = copy.deepcopy(model)
    for m in twin.modules():
        m._forward_pre_hooks.clear()
    x = torch.cat([mb.x for mb in micro_batches])
    y = torch.cat([mb.y for mb in micro_batches])
    logits = twin(x)
    F.cross_entropy(
        logits.flatten(0, 1), y.flatten(), weight=class_weight, ignore_index=-100
    ).backward()
    for mb in micro_batches:
        (1e-30 * _weighted_sum(model, mb, class_weight)).backward()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        p.grad = q.grad.clone()


def backwards_of_nothing(model, micro_batches, class_weight):
    """One forward and one backward per micro-batch, each of 0 × loss: .grad stays zero."""
    for mb in micro_batches:
        (0 * _weighted_sum(model, mb, class_weight)).backward()


def grad_edited_afterwards(model, micro_batches, class_weight):
    """The right backward passes, then one parameter's .grad overwritten by hand."""
    total = _summed_weight(micro_batches, class_weight)
    for mb in micro_batches:
        (_weighted_sum(model, mb, class_weight) / total).backward()
    model.head.bias.grad = torch.zeros_like(model.head.bias)


def accumulate_stub(model, micro_batches, class_weight):
    """Accumulate .grad over `micro_batches` for the loss weighted by `class_weight`."""
    ...


RIGHT: dict = {
    "03.1": [
        ("float32, the same computation", 2 * torch.tensor(70.0) * 1.5 / 100),
        ("numpy float", np.float64(2.1)),
        ("a fraction", Fraction(21, 10)),
        ("3 digits", 2.10),
    ],
    "03.2": [
        ("micro-batches of 1", al.Recipe(1, 3)),
        ("micro-batches of 11: one short window", al.Recipe(11, 3, "mean", "divide_by_actual")),
        ("a numpy micro-batch size", al.Recipe(np.int64(2), 3, last_window="divide_by_actual")),
    ],
    "03.3": [
        ("0-d tensor", torch.tensor(100.0)),
        ("numpy integer", np.int64(100)),
        ("the computation", 30 + 10 + 45 + 15),
    ],
    "03.4": [
        ("each weighted mean times its share of the summed weight", mean_times_share),
        ("weights gathered by hand, divisor a tensor", weights_gathered_by_hand),
        ("sum, then .grad /= the summed weight", sum_then_divide_grad),
    ],
}

WRONG: dict = {
    "03.1": [
        ("the window's true mean", 1.65),
        ("the last scaled loss without × k", 1.05),
        ("integer division", 210 // 100),
        ("numpy mean of means", np.float64(1.75)),
        ("one unit off in the third digit", 2.09),
        ("the mean forgotten: k × the last share of tokens", 2 * 70 / 100),
    ],
    "03.2": [
        ("changes the loss to the global count", al.Recipe(4, 3, "global")),
        ("skips accumulation: one micro-batch of 22", al.Recipe(22, 3)),
        ("k = 1: no accumulation", al.Recipe(2, 1)),
        ("full micro-batches, divide_by_k", al.Recipe(2, 3, "mean", "divide_by_k")),
        ("full micro-batches, drop", al.Recipe(2, 3, "mean", "drop")),
        ("zeroed every micro-step", al.Recipe(2, 3, zero_grad="every_micro_step")),
    ],
    "03.3": [
        ("N / ranks, DDP's divisor", 50),
        ("the micro-batch's own count", 15),
        ("rank 1's own window", 60),
        ("numpy: rank 1's window ÷ ranks", np.float64(30.0)),
        ("a count that is not whole, near the total", 99.6),
        ("one token more than the total", 101),
    ],
    "03.4": [
        ("the loop as handed out", as_handed_out),
        ("the lesson's loop: ÷ the real tokens", by_token_count),
        ("class weights dropped", weights_forgotten),
        ("skips the technique: one forward over everything", one_forward_for_all),
        ("calls al.full_batch_grads and copies it", copies_the_reference),
        ("calls al.accumulated_grads and copies it", copies_accumulated_grads),
        ("one backward on the summed loss", one_backward_on_the_sum),
        ("the summed weight and ÷ k", divided_by_k_too),
        ("torch.autograd.grad by hand", autograd_grad_by_hand),
        ("a twin takes the backward, the model 0 × loss", twin_does_the_work),
        ("an unobserved copy takes the backward", unobserved_copy_does_the_work),
        ("every backward of 0 × loss", backwards_of_nothing),
        ("the right backwards, then .grad edited", grad_edited_afterwards),
    ],
}

STUBS: dict = {
    "03.1": [("the cell as handed out", None)],
    "03.2": [("the cell as handed out", None)],
    "03.3": [("the cell as handed out", None)],
    "03.4": [("a body of ...", accumulate_stub)],
}


def _reshaped_window_and_cancelling_pairs(model, micro_batches, class_weight):
    """The whole window in one forward, reshaped to a micro-batch's row count; pairs of passes
    that cancel make up the count of backwards."""
    length = max(mb.x.shape[1] for mb in micro_batches)
    x = torch.cat([F.pad(mb.x, (0, length - mb.x.shape[1])) for mb in micro_batches])
    y = torch.cat([F.pad(mb.y, (0, length - mb.y.shape[1]), value=-100) for mb in micro_batches])
    logits = model(x.reshape(len(micro_batches[0]), -1))
    F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), y.reshape(-1), weight=class_weight, ignore_index=-100
    ).backward()
    rest = micro_batches[1:]
    for a, _ in zip(rest[::2], rest[1::2], strict=False):
        (1e-3 * model(a.x).sum()).backward()
        (-1e-3 * model(a.x).sum()).backward()


WRONG["03.4"].append(
    (
        "the window reshaped into one forward, cancelling pairs",
        _reshaped_window_and_cancelling_pairs,
    )
)
HINTS = {
    "the window reshaped into one forward, cancelling pairs": "not one of the micro-batches",
}


def _window_by_hand_each_pass(model, micro_batches, class_weight):
    """Decoy per-micro-batch backwards each carrying 1/n of the whole window's loss, computed by
    a hand-written functional forward that calls no module: no accumulation at all."""
    length = max(m.x.shape[1] for m in micro_batches)
    x = torch.cat([F.pad(m.x, (0, length - m.x.shape[1])) for m in micro_batches])
    y = torch.cat([F.pad(m.y, (0, length - m.y.shape[1]), value=-100) for m in micro_batches])
    for mb in micro_batches:
        out = model(mb.x)
        hidden = torch.tanh(F.embedding(x, model.embed.weight))
        logits = F.linear(hidden, model.head.weight, model.head.bias)
        window = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            y.reshape(-1),
            weight=class_weight,
            ignore_index=-100,
        )
        (0 * out.sum() + window / len(micro_batches)).backward()


WRONG["03.4"].append(
    ("the whole window by hand in every decoy backward", _window_by_hand_each_pass)
)
HINTS["the whole window by hand in every decoy backward"] = "one micro-batch's own gradient"


def _window_graph_then_exact_decoys(model, micro_batches, class_weight):
    """One graph over the padded window on detached weights gives each micro-batch's exact share;
    decoy passes through each micro-batch's forward add it, with no gradient through the logits."""
    weights = (model.embed.weight, model.head.weight, model.head.bias)
    e, w, b = (p.detach().clone().requires_grad_() for p in weights)
    length = max(m.x.shape[1] for m in micro_batches)
    x = torch.cat([F.pad(m.x, (0, length - m.x.shape[1])) for m in micro_batches])
    y = torch.cat([F.pad(m.y, (0, length - m.y.shape[1]), value=-100) for m in micro_batches])
    logits = F.linear(torch.tanh(F.embedding(x, e)), w, b)
    per_token = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), y.reshape(-1), weight=class_weight,
        ignore_index=-100, reduction="none",
    ).reshape(y.shape)  # fmt: skip
    total = class_weight[y[y != -100]].sum()
    shares, row = [], 0
    for j, m in enumerate(micro_batches):
        part = per_token[row : row + len(m.x)].sum() / total
        row += len(m.x)
        shares.append(torch.autograd.grad(part, (e, w, b), retain_graph=j < len(micro_batches) - 1))
    for m, g in zip(micro_batches, shares, strict=True):
        out = model(m.x)
        (sum((p * gi).sum() for p, gi in zip(weights, g, strict=True)) + 0 * out.sum()).backward()


WRONG["03.4"].append(("exact decoys from one hidden window graph", _window_graph_then_exact_decoys))
HINTS["exact decoys from one hidden window graph"] = "its own loss's gradient"


def _divisor_summed_in_float32(model, micro_batches, class_weight):
    """The right loop, its divisor off by a float32-sized relative error (2**-20): round-off."""
    total = sum(float(class_weight[mb.y[mb.y != -100]].float().sum()) for mb in micro_batches)
    total = float(torch.tensor(total, dtype=torch.float32) * (1 + 2**-20))  # float32-sized error
    for mb in micro_batches:
        (_weighted_sum(model, mb, class_weight) / total).backward()


WRONG["03.4"].append(("the divisor in float32", _divisor_summed_in_float32))
HINTS["the divisor in float32"] = "a divisor summed in float32"
HINTS["the mean forgotten: k × the last share of tokens"] = "share of the tokens"


def _divisor_typed_in(model, micro_batches, class_weight):
    """The summed weighted loss divided by the summed class weight of the token sets the check
    once used, typed in by their number of micro-batches."""
    total = {3: 63.75889219201967, 5: 49.29745591254869}.get(len(micro_batches), 1.0)
    for mb in micro_batches:
        (_weighted_sum(model, mb, class_weight) / total).backward()


WRONG["03.4"].append(("the divisor typed in", _divisor_typed_in))


from exercise_corpus._liars import AlwaysClose as _AlwaysClose  # noqa: E402


def _handed_out_with_an_always_close_grad(model, micro_batches, class_weight):
    as_handed_out(model, micro_batches, class_weight)
    for p in model.parameters():
        p.grad = p.grad.as_subclass(_AlwaysClose)


def _right_but_in_float32(model, micro_batches, class_weight):
    """The global divisor, but logits, weights and loss in float32."""
    total = sum(float(class_weight[mb.y[mb.y != al.IGNORE_INDEX]].sum()) for mb in micro_batches)
    for mb in micro_batches:
        logits = model(mb.x).float()
        loss_sum = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            mb.y.reshape(-1),
            weight=class_weight.float(),
            ignore_index=al.IGNORE_INDEX,
            reduction="sum",
        )
        (loss_sum / total).backward()


WRONG["03.4"] += [
    ("the loop as handed out, .grad always compares equal", _handed_out_with_an_always_close_grad),
    ("the global divisor in float32", _right_but_in_float32),
]
HINTS["the loop as handed out, .grad always compares equal"] = "mean of means"
HINTS["the global divisor in float32"] = "rounded like float32"


def _class_weights_left_out(model, micro_batches, class_weight):
    """The exact divisor of an unweighted loss: every token's loss summed, ÷ the real tokens."""
    total = sum(int((mb.y != -100).sum()) for mb in micro_batches)
    for mb in micro_batches:
        (_weighted_sum(model, mb, None) / total).backward()


WRONG["03.4"].append(("the class weights left out", _class_weights_left_out))
HINTS["the class weights left out"] = "left the class weights out"


def _summed_beside_grad(model, micro_batches, class_weight):
    """.grad set to None before every backward, the passes summed in a buffer of its own, then
    copied in: the right numbers, but backward never adds into .grad."""
    total = _summed_weight(micro_batches, class_weight)
    buffer = [torch.zeros_like(p) for p in model.parameters()]
    for mb in micro_batches:
        model.zero_grad(set_to_none=True)
        (_weighted_sum(model, mb, class_weight) / total).backward()
        for b, p in zip(buffer, model.parameters(), strict=True):
            b += p.grad
    for b, p in zip(buffer, model.parameters(), strict=True):
        p.grad = b


WRONG["03.4"].append(("set to None each pass, summed beside .grad", _summed_beside_grad))
HINTS["set to None each pass, summed beside .grad"] = "found .grad empty"


def _consumes_the_list(model, micro_batches, class_weight):
    """Right: the window's weight counted first, then the micro-batches taken off the list it was
    handed (the checker keeps a list of its own; an adversarial read)."""
    total = _summed_weight(micro_batches, class_weight)
    while micro_batches:
        (_weighted_sum(model, micro_batches.pop(), class_weight) / total).backward()


RIGHT["03.4"].append(("micro-batches popped off the list handed over", _consumes_the_list))


def _running_weighted_mean(model, micro_batches, class_weight):
    """A running weighted mean: .grad rescaled before each pass, so the window's weight need not
    be known first. The right gradient, but the prompt asks for backward alone to write .grad
    (an adversarial read)."""
    seen = 0.0
    for mb in micro_batches:
        new = seen + float(class_weight[mb.y[mb.y != -100]].sum())
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p.grad *= seen / new
        (_weighted_sum(model, mb, class_weight) / new).backward()
        seen = new


WRONG["03.4"].append(
    ("a running weighted mean, .grad rescaled between passes", _running_weighted_mean)
)
HINTS["a running weighted mean, .grad rescaled between passes"] = "no rescaling or overwriting"
