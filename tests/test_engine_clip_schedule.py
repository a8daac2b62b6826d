"""Recipe's clipping and scheduler fields (lesson 06): defaults unchanged, validation, behaviour."""

import pytest
import torch

import accumlab as al


def _setup(n=16):
    return al.mlp(features=4, hidden=8, depth=1, seed=0), al.regression_data(
        n=n, features=4, seed=0
    )


def test_defaults_keep_old_behaviour():
    r = al.Recipe(4, 2)
    assert (r.clip_norm, r.clip_at, r.scheduler_step) == (None, "window", "optimizer_step")
    model, data = _setup()
    trace = al.run(r, model, data)
    assert trace.clip_norms == [] and trace.count("clip") == 0 and trace.count("schedule") == 0
    assert len(trace.lrs) == trace.steps == 2


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"clip_norm": 0}, "clip_norm"),
        ({"clip_norm": -1.0}, "clip_norm"),
        ({"clip_norm": True}, "clip_norm"),
        ({"clip_norm": "1"}, "clip_norm"),
        ({"clip_at": "epoch"}, "clip_at"),
        ({"scheduler_step": "epoch"}, "scheduler_step"),
    ],
)
def test_bad_fields_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        al.Recipe(4, 2, **kwargs)


def test_scheduler_without_optimizer_is_a_clear_error():
    model, data = _setup()
    with pytest.raises(ValueError, match="scheduler"):
        al.run(
            al.Recipe(4), model, data, optimizer=None, scheduler=al.precision.warmup_cosine(2, 4)
        )


def test_window_clipping_matches_clipped_full_batch():
    model, data = _setup()
    full = al.run(al.Recipe(16, 1, clip_norm=0.1), model, data)
    acc = al.run(al.Recipe(4, 4, clip_norm=0.1), model, data)
    assert full.clip_norms[0] > 0.1  # clipping is active, so the test means something
    assert al.precision.max_param_gap(acc.params[0], full.params[0]) < 1e-12
    assert abs(acc.clip_norms[0] - full.clip_norms[0]) < 1e-12


def test_micro_step_clipping_clips_the_running_grad():
    # the loop people write: backward, then clip_grad_norm_ on the accumulated .grad, every time
    model, data = _setup()
    trace = al.run(al.Recipe(4, 4, clip_norm=0.1, clip_at="micro_step"), model, data)
    assert len(trace.clip_norms) == 4 and trace.count("clip") == 4
    norm = float(sum(g.pow(2).sum() for g in trace.window_grads[0].values())) ** 0.5
    assert norm <= 0.1 * (1 + 1e-9)  # the last clip saw the whole window: never above max_norm
    full = al.run(al.Recipe(16, 1, clip_norm=0.1), model, data)
    assert al.precision.max_param_gap(trace.params[0], full.params[0]) > 1e-4  # another direction
    # the same loop written by hand gives the same gradient
    import copy

    hand = copy.deepcopy(model)
    for mb in data.micro_batches(4):
        (torch.nn.functional.mse_loss(hand(mb.x), mb.y) / 4).backward()
        torch.nn.utils.clip_grad_norm_(hand.parameters(), 0.1)
    for name, p in hand.named_parameters():
        assert torch.allclose(p.grad, trace.window_grads[0][name], atol=1e-15), name


def test_micro_step_clipping_is_lesson_08s_clip_every_micro_batch_loop():
    # the engine and the audit catalogue's hand-written loop must be the same loop
    import copy

    from accumlab.audit import catalogue

    model, data = _setup()
    engine = al.run(al.Recipe(4, 4, clip_norm=0.1, clip_at="micro_step"), model, data, lr=0.1)
    hand = copy.deepcopy(model)
    batches = [(mb.x, mb.y) for mb in data.micro_batches(4)]
    opt = torch.optim.SGD(hand.parameters(), lr=0.1)
    catalogue.clip_every_micro_batch(hand, opt, batches, 4, max_norm=0.1)
    for name, p in hand.named_parameters():
        assert torch.allclose(p, engine.params[0][name], atol=1e-15), name


def test_inactive_clipping_changes_nothing():
    model, data = _setup()
    plain = al.run(al.Recipe(4, 4), model, data)
    for at in al.CLIP_PLACEMENTS:
        clipped = al.run(al.Recipe(4, 4, clip_norm=1e6, clip_at=at), model, data)
        assert al.precision.max_param_gap(clipped.params[0], plain.params[0]) < 1e-12


def test_micro_step_clipping_keeps_zero_grad_bug_semantics():
    model, data = _setup()
    trace = al.run(
        al.Recipe(4, 4, zero_grad="every_micro_step", clip_norm=1e6, clip_at="micro_step"),
        model,
        data,
    )
    plain = al.run(al.Recipe(4, 4, zero_grad="every_micro_step"), model, data)
    assert al.precision.max_param_gap(trace.params[0], plain.params[0]) < 1e-12


def test_scheduler_placement_counts():
    model, data = _setup()
    sched = al.precision.warmup_cosine(2, 8)
    ok = al.run(al.Recipe(2, 4), model, data, scheduler=sched)
    bad = al.run(al.Recipe(2, 4, scheduler_step="micro_step"), model, data, scheduler=sched)
    assert ok.count("schedule") == ok.steps == 2
    assert bad.count("schedule") == 4 * bad.steps
    # the i-th correct step uses the schedule at i calls; the buggy one at (i + 1)·k − 1 calls
    assert ok.lrs == pytest.approx([0.01 * 0.5, 0.01 * 1.0])
    assert bad.optimizer.param_groups[0]["lr"] != ok.optimizer.param_groups[0]["lr"]


def test_no_scheduler_warning_leaks(recwarn):
    model, data = _setup()
    al.run(
        al.Recipe(2, 4, scheduler_step="micro_step"),
        model,
        data,
        scheduler=al.precision.warmup_cosine(2, 8),
    )
    assert not [w for w in recwarn if "lr_scheduler" in str(w.message)]


def test_trace_keeps_optimizer_state():
    model, data = _setup()
    trace = al.run(al.Recipe(4, 2), model, data, optimizer="adam", epochs=2)
    assert al.precision.adam_steps(trace) == 4
    assert isinstance(trace.optimizer, torch.optim.Adam)
