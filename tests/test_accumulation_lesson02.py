"""Lesson 02's figure and lengths, checked against what they were drawn or computed from."""

import torch

import accumlab as al

A = al.accumulation


def test_the_figure_draws_what_window_progress_computed():
    model = al.mlp(features=3, hidden=8, depth=1, seed=0)
    data = al.regression_data(n=32, features=3, seed=0)
    fig = A.plot_window_progress(A.window_progress(model, data, 4, 4))
    for size, k, zero, divide in [
        (4, 4, "window", True),
        (1, 8, "every_micro_step", True),
        (16, 2, "window", False),
        (2, 16, "window", True),
    ]:
        progress = A.window_progress(model, data, size, k, zero_grad=zero, divide_by_k=divide)
        A.update_window_progress(fig, progress)
        drawn = A.drawn_window_progress(fig)
        assert drawn["names"] == progress["names"][:8]
        assert torch.equal(drawn["accumulated"], progress["accumulated"][:, :8])
        assert torch.equal(drawn["full"], progress["full"][:8])  # each dashed line at its entry
    fresh = A.drawn_window_progress(A.plot_window_progress(progress))
    assert torch.equal(fresh["full"], progress["full"][:8])


def test_every_position_is_that_micro_batch_alone():
    """ratios[j] and cosines[j] are micro-batch j's own gradient ÷ k against the full batch,
    recomputed here from al.full_batch_grads on each micro-batch's rows."""
    model = al.mlp(features=3, hidden=8, depth=1, seed=0)
    data = al.regression_data(n=32, features=3, seed=0)
    lengths = A.last_only_lengths(model, data, 8)
    full = al.flatten(al.full_batch_grads(model, data))
    for j in range(4):
        part = al.flatten(al.full_batch_grads(model, data[8 * j : 8 * j + 8]))
        assert abs(lengths["ratios"][j] - float(part.norm() / 4 / full.norm())) <= 1e-12
        cosine = float(torch.nn.functional.cosine_similarity(part, full, dim=0))
        assert abs(lengths["cosines"][j] - cosine) <= 1e-12
    assert len(set(lengths["ratios"])) == 4
