"""Lesson 03: loss normalisations, last-window policies and per-token weights."""

from fractions import Fraction

import pytest
import torch
from matplotlib.figure import Figure

import accumlab as al

EXACT = 1e-12


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """As al.setup() does in the lessons: tiny models run faster on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tokens():
    return al.token_data(lengths=[3, 9, 1, 7, 12, 5, 2, 8, 6, 4], vocab=16, seed=0)


@pytest.fixture(scope="module")
def lm():
    return al.TinyLM(vocab=16, dim=8, seed=0)


@pytest.fixture(scope="module")
def reg():
    return al.regression_data(n=20, features=3, outputs=2, seed=1)


@pytest.fixture(scope="module")
def net():
    return al.mlp(features=3, hidden=5, outputs=2, seed=1)


# --- token_weights -------------------------------------------------------------------------


def test_token_weights_by_hand():
    lengths = [3, 1, 2, 4]  # micro-batches of 2 sequences: 4 and 6 real tokens, N = 10
    mean = al.scaling.token_weights(lengths, "mean", micro_batch_size=2)
    glob = al.scaling.token_weights(lengths, "global", micro_batch_size=2)
    assert mean.dtype == glob.dtype == torch.float64
    assert mean.shape == glob.shape == (4, 4)
    expected_mean = [float(Fraction(1, 2 * 4))] * 2 + [float(Fraction(1, 2 * 6))] * 2  # 1/(G·nᵢ)
    for row, n in enumerate(lengths):
        assert mean[row, :n].tolist() == [expected_mean[row]] * n
        assert glob[row, :n].tolist() == [0.1] * n  # 1/N
        assert mean[row, n:].abs().sum() == 0 and glob[row, n:].abs().sum() == 0  # padding weighs 0
    assert float(mean.sum()) == pytest.approx(1.0, rel=EXACT)
    assert float(glob.sum()) == pytest.approx(1.0, rel=EXACT)
    assert al.scaling.token_weights(lengths, "sum").sum() == sum(lengths)
    none = al.scaling.token_weights(lengths, "none", micro_batch_size=2)
    assert float(none.sum()) == pytest.approx(2.0, rel=EXACT)  # G means, not divided: G× too big


def test_token_weights_equal_lengths_mean_equals_global():
    lengths = [5] * 6
    assert torch.equal(
        al.scaling.token_weights(lengths, "mean", micro_batch_size=2),
        al.scaling.token_weights(lengths, "global", micro_batch_size=2),
    )


def test_token_weights_short_last_window_divide_by_k():
    # 5 sequences, micro-batch 1, k = 3: the second window holds 2 micro-batches
    w = al.scaling.token_weights(
        [2, 2, 2, 2, 2], "mean", accumulation_steps=3, last_window="divide_by_k"
    )
    assert w[3, 0] == pytest.approx(1 / (3 * 2), rel=EXACT)
    w = al.scaling.token_weights(
        [2, 2, 2, 2, 2], "mean", accumulation_steps=3, last_window="divide_by_actual"
    )
    assert w[3, 0] == pytest.approx(1 / (2 * 2), rel=EXACT)
    w = al.scaling.token_weights([2, 2, 2, 2, 2], "mean", accumulation_steps=3, last_window="drop")
    assert w[3:].abs().sum() == 0


@pytest.mark.parametrize(
    "lengths, kwargs, match",
    [
        ([3, -1, 2], {}, r"lengths\[1\].*-1"),
        ([3, 2.5], {}, r"lengths\[1\].*2.5"),
        ([], {}, "lengths"),
        ([0, 0, 4], {"micro_batch_size": 2, "accumulation_steps": 1}, "window 0.*zero real"),
        ([0, 0], {"normalization": "sum"}, "zero real"),
        ([0, 3], {"normalization": "mean"}, "micro-batch.*zero real"),
        ([0, 3], {"normalization": "none"}, "micro-batch.*zero real"),
        ([2, 3], {"normalization": "average"}, "normalization.*'average'"),
        ([2, 3], {"last_window": "pad"}, "last_window.*'pad'"),
        ([2, 3], {"micro_batch_size": 0}, "micro_batch_size"),
        ([2, 3], {"micro_batch_size": 3}, "micro_batch_size"),
    ],
)
def test_token_weights_bad_input(lengths, kwargs, match):
    with pytest.raises(ValueError, match=match):
        al.scaling.token_weights(lengths, **kwargs)


def test_zero_token_micro_batch_is_fine_under_global():
    w = al.scaling.token_weights([0, 3], "global")
    assert w[1].tolist() == [1 / 3] * 3


# --- effective weights predict what run() accumulates ------------------------------------------


@pytest.mark.parametrize("normalization", al.NORMALIZATIONS)
@pytest.mark.parametrize("last_window", al.LAST_WINDOW_POLICIES)
def test_weights_predict_engine_tokens(tokens, lm, normalization, last_window):
    recipe = al.Recipe(2, 2, normalization, last_window)  # 10 sequences: windows of 4, 4, 2
    w = al.scaling.effective_weights(tokens.lengths(), recipe)
    predicted = al.scaling.weighted_grads(lm, tokens, w.per_item, loss="cross_entropy")
    trace = al.run(recipe, lm, tokens, loss="cross_entropy", optimizer=None)
    assert al.grad_diff(predicted, al.scaling.epoch_grads(trace)).max_rel <= EXACT
    assert w.matches_reference() == (normalization == "global" and last_window != "drop")


@pytest.mark.parametrize("normalization", al.NORMALIZATIONS)
@pytest.mark.parametrize("last_window", al.LAST_WINDOW_POLICIES)
def test_weights_predict_engine_regression(reg, net, normalization, last_window):
    recipe = al.Recipe(3, 3, normalization, last_window)  # 20 samples: micro 3,3,3 | 3,3,3 | 2
    w = al.scaling.effective_weights([2] * len(reg), recipe)  # 2 outputs: 2 items per sample
    predicted = al.scaling.weighted_grads(net, reg, w.per_item)
    trace = al.run(recipe, net, reg, optimizer=None)
    assert al.grad_diff(predicted, al.scaling.epoch_grads(trace)).max_rel <= EXACT


def test_weights_change_with_the_policy(tokens, lm):
    # the prediction test can fail: a wrong weight vector does not reproduce the engine
    good = al.scaling.effective_weights(tokens.lengths(), al.Recipe(2, 2, "mean", "divide_by_k"))
    bad = al.scaling.effective_weights(
        tokens.lengths(), al.Recipe(2, 2, "mean", "divide_by_actual")
    )
    trace = al.run(
        al.Recipe(2, 2, "mean", "divide_by_k"), lm, tokens, loss="cross_entropy", optimizer=None
    )
    assert (
        al.grad_diff(
            al.scaling.weighted_grads(lm, tokens, bad.per_item, loss="cross_entropy"),
            al.scaling.epoch_grads(trace),
        ).max_rel
        > 1e-3
    )
    assert not torch.equal(good.per_item, bad.per_item)


def test_weighted_grads_checks_shape(reg, net):
    with pytest.raises(ValueError, match="per_item"):
        al.scaling.weighted_grads(net, reg, torch.ones(3))


# --- the short last window -------------------------------------------------------------------


def test_sample_weights_each_policy():
    by_k = al.scaling.sample_weights(20, 4, 3, last_window="divide_by_k")
    actual = al.scaling.sample_weights(20, 4, 3, last_window="divide_by_actual")
    drop = al.scaling.sample_weights(20, 4, 3, last_window="drop")
    assert by_k.per_item[:12].tolist() == [1 / 12] * 12 == actual.per_item[:12].tolist()
    assert by_k.per_item[12:].tolist() == [1 / 12] * 8  # 1/(k·b): under-weighted
    assert actual.per_item[12:].tolist() == [1 / 8] * 8  # 1/(2·4) = 1/N of the short window
    assert drop.per_item[12:].abs().sum() == 0 and not drop.kept[12:].any() and drop.kept[:12].all()
    assert (
        actual.matches_reference() and not by_k.matches_reference() and not drop.matches_reference()
    )
    assert by_k.window.tolist() == [0] * 12 + [1] * 8


def test_window_errors_per_policy():
    data, model = al.regression_data(n=20, seed=0), al.mlp(seed=0)
    actual = al.scaling.window_errors(al.Recipe(4, 3, last_window="divide_by_actual"), model, data)
    by_k = al.scaling.window_errors(al.Recipe(4, 3, last_window="divide_by_k"), model, data)
    drop = al.scaling.window_errors(al.Recipe(4, 3, last_window="drop"), model, data)
    assert [(c.start, c.stop, c.micro_batches) for c in actual] == [(0, 12, 3), (12, 20, 2)]
    assert all(c.max_rel <= EXACT for c in actual)
    assert by_k[0].max_rel <= EXACT
    assert by_k[1].max_rel == pytest.approx(1 / 3, rel=1e-9)  # 2/3 of it
    assert drop[0].kept and not drop[1].kept and drop[1].max_rel == 1.0


def test_short_last_micro_batch_needs_global():
    data, model = al.regression_data(n=22, seed=0), al.mlp(seed=0)  # last window: 4, 4, 2 samples
    actual = al.scaling.window_errors(al.Recipe(4, 3, "mean", "divide_by_actual"), model, data)
    glob = al.scaling.window_errors(al.Recipe(4, 3, "global"), model, data)
    assert actual[1].max_rel > 1e-3
    assert all(c.max_rel <= EXACT for c in glob)


# --- why divide by k; sum vs mean ----------------------------------------------------------


def test_none_is_k_times_and_sum_is_n_times(reg, net):
    full = al.full_batch_grads(net, reg)
    k, n_items = 4, reg.y.numel()
    none = al.accumulated_grads(net, reg, 5, normalization="none")
    mean = al.accumulated_grads(net, reg, 5, normalization="mean")
    summed = al.accumulated_grads(net, reg, 5, normalization="sum")
    assert al.grad_diff(none, al.scaling.scale_grads(full, k)).max_rel <= EXACT
    assert al.grad_diff(mean, full).max_rel <= EXACT
    assert al.grad_diff(summed, al.scaling.scale_grads(full, n_items)).max_rel <= EXACT
    assert al.grad_diff(none, full).max_rel > 1


# --- tokens: toy, ranks, logging ----------------------------------------------------------


def test_combined_loss_toy():
    assert al.scaling.combined_loss([10, 90], [1.0, 2.0], "global") == pytest.approx(1.9, rel=EXACT)
    assert al.scaling.combined_loss([10, 90], [1.0, 2.0], "mean") == pytest.approx(1.5, rel=EXACT)
    with pytest.raises(ValueError, match="means"):
        al.scaling.combined_loss([10, 90], [1.0])
    with pytest.raises(ValueError, match="tokens"):
        al.scaling.combined_loss([10, -90], [1.0, 2.0])


def test_toy_on_a_real_model():
    data, model = al.token_data(lengths=[10, 90], vocab=16, seed=0), al.TinyLM(vocab=16, dim=8)
    full = al.full_batch_grads(model, data, loss="cross_entropy")
    glob = al.accumulated_grads(model, data, 1, normalization="global", loss="cross_entropy")
    mean = al.accumulated_grads(model, data, 1, normalization="mean", loss="cross_entropy")
    assert al.grad_diff(glob, full).max_rel <= EXACT
    assert al.grad_diff(mean, full).max_rel > 1e-2


def test_simulated_ranks(tokens, lm):
    full = al.full_batch_grads(lm, tokens, loss="cross_entropy")
    glob = al.scaling.simulated_ranks_grads(lm, tokens, 5, token_count="global")
    local = al.scaling.simulated_ranks_grads(lm, tokens, 5, token_count="local")
    mean_of_means = al.accumulated_grads(lm, tokens, 2, normalization="mean", loss="cross_entropy")
    assert al.grad_diff(glob, full).max_rel <= EXACT
    assert al.grad_diff(local, full).max_rel > 1e-2
    # the same error, ranks for micro-batches
    assert al.grad_diff(local, mean_of_means).max_rel <= EXACT
    assert [len(s) for s in al.scaling.rank_slices(tokens, 5)] == [2] * 5


def test_simulated_ranks_bad_input(tokens, lm):
    with pytest.raises(ValueError, match="ranks.*3"):
        al.scaling.simulated_ranks_grads(lm, tokens, 3)
    with pytest.raises(ValueError, match="token_count.*'mean'"):
        al.scaling.simulated_ranks_grads(lm, tokens, 2, token_count="mean")
    empty = al.token_data(lengths=[0, 0, 3, 4], vocab=16)
    with pytest.raises(ValueError, match="rank 0 holds zero"):
        al.scaling.simulated_ranks_grads(lm, empty, 2, token_count="local")
    assert (
        al.grad_diff(
            al.scaling.simulated_ranks_grads(lm, empty, 2),
            al.full_batch_grads(lm, empty, loss="cross_entropy"),
        ).max_rel
        <= EXACT
    )


def test_logged_losses(tokens, lm):
    trace = al.run(al.Recipe(2, 2, "global"), lm, tokens, loss="cross_entropy", optimizer=None)
    logs = al.scaling.logged_losses(trace)
    assert len(logs["window"]) == 3
    for w, (start, stop) in enumerate([(0, 4), (4, 8), (8, 10)]):
        truth = al.scaling.mean_loss(lm, tokens[start:stop], loss="cross_entropy")
        assert logs["window"][w] == pytest.approx(truth, rel=EXACT)
        assert logs["sum_of_scaled"][w] == pytest.approx(truth, rel=EXACT)
    assert abs(logs["last_scaled"][0] - logs["window"][0]) > 1e-2
    assert abs(logs["k_times_last"][0] - logs["window"][0]) > 1e-2


# --- effective batch and learning rate -------------------------------------------------------


def test_effective_batch_and_linear_rule():
    assert al.scaling.effective_batch_size(8, 4, 2) == 64 == al.Recipe(8, 4).window_size * 2
    assert al.scaling.linear_scaled_lr(0.1, 32, 256) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="ranks"):
        al.scaling.effective_batch_size(8, 4, 0)
    with pytest.raises(ValueError, match="base_lr"):
        al.scaling.linear_scaled_lr(-1.0, 32, 64)


def test_linear_scaling_gap_is_first_order():
    rows = al.scaling.linear_scaling_gap(
        al.mlp(seed=0), al.regression_data(n=32, seed=0), 4, 4, [1e-4, 1e-3]
    )
    ratio = rows[1]["relative_gap"] / rows[0]["relative_gap"]
    assert 5 < ratio < 20  # ∝ η: ten times the lr, about ten times the relative gap
    assert rows[0]["relative_gap"] < 1e-3


# --- widget and plots --------------------------------------------------------------------


def test_explorer_controls_drive_data():
    ex = al.scaling.loss_scaling_explorer()
    assert [c.max_rel > 1e-3 for c in ex.data["checks"]] == [True, True, True]
    ex.controls["normalization"].value = "global"
    assert all(c.max_rel <= EXACT for c in ex.data["checks"])
    ex.controls["last_window"].value = "drop"
    assert [c.kept for c in ex.data["checks"]] == [True, True, False]
    ex.controls["micro_batch_size"].value = 10
    assert ex.controls["accumulation_steps"].value == 2  # clamped: 10 × 2 ≤ 20 sequences
    ex.controls["normalization"].value = "mean"
    ex.controls["last_window"].value = "divide_by_actual"
    ex.controls["spread"].value = 0  # equal lengths and full micro-batches: mean is exact too
    ex.controls["micro_batch_size"].value = 2
    assert all(c.max_rel <= EXACT for c in ex.data["checks"])
    assert ex.error is None and isinstance(ex.figure, Figure)
    assert ex.controls["spread"].max == al.scaling.MAX_SPREAD


def test_explorer_updates_one_figure_with_what_loss_scaling_data_computes():
    ex = al.scaling.loss_scaling_explorer()
    fig, image = ex.figure, ex.figure.axes[1].images[0]
    ex.controls["micro_batch_size"].value = 1
    ex.controls["accumulation_steps"].value = 1
    ex.controls["spread"].value = 0
    ex.controls["last_window"].value = "drop"
    assert ex.error is None and ex.figure is fig and fig.axes[1].images[0] is image  # moved
    plain = al.scaling.loss_scaling_data(1, 1, "mean", "drop", 0)
    assert ex.data["checks"] == plain["checks"] and torch.equal(ex.data["ratio"], plain["ratio"])
    bars = fig.axes[0].patches  # one per window: 20 windows of one sequence
    assert [b.get_height() for b in bars] == [max(c.max_rel, 1e-17) for c in plain["checks"]]
    assert len(bars) == 20 and image.get_array().shape == tuple(plain["ratio"].shape) == (20, 12)
    assert fig.axes[0].get_title() == "mean, drop: gradient error per window"
    ex.controls["micro_batch_size"].value = 4
    assert len(fig.axes[0].patches) == len(ex.data["checks"]) == 5  # the old bars are gone


def test_explorer_colours_are_one_fixed_scale_with_one_white():
    """Every setting is drawn on the same log scale around 1: an error of 12× never fades to
    near-white because some other token is 238× off, and a dropped token (weight 0) is not drawn
    as padding."""
    ex = al.scaling.loss_scaling_explorer()
    image = ex.figure.axes[1].images[0]
    colour = image.to_rgba  # value -> RGBA through the image's own norm and colour map
    ex.controls["micro_batch_size"].value = 6
    ex.controls["normalization"].value = "sum"
    ex.controls["spread"].value = 11
    ratio = ex.data["ratio"]
    assert float(ratio.max()) > 100 and bool((ratio == 12).any())  # the case: 12× and 238× off
    white, over = colour(1.0), colour(1e3)
    assert white[:3] == pytest.approx((1.0, 1.0, 1.0), abs=0.02)
    assert colour(12.0) == over and colour(4.0 + 1e-9) == over  # saturated, far from white
    assert min(colour(2.0)[1:3]) < 0.6 and min(colour(0.5)[:2]) < 0.6  # ×2 and ×1/2: strong
    norm = (image.norm.vmin, image.norm.vmax)
    ex.controls["normalization"].value = "mean"
    ex.controls["last_window"].value = "drop"
    assert (image.norm.vmin, image.norm.vmax) == norm  # the scale does not follow the data
    dropped = image.get_array()[-1, 0]  # the last window's first token, dropped: weight 0
    assert not ex.data["checks"][-1].kept and colour(dropped) == colour(0.0 + 1e-9) != white
    assert not image.get_array().mask[-1, 0]  # drawn, not hidden like padding
    bar = ex.figure.axes[2]  # the colour bar labels 1 as exact
    labels = {t.get_text() for t in bar.get_yticklabels()}
    assert "1 exact" in labels


def test_explorer_bars_fit_and_ticks_are_whole():
    """The tallest error bar is inside the axes and labelled with its value; the heat map's
    sequence and position ticks are whole numbers."""
    ex = al.scaling.loss_scaling_explorer()
    ex.controls["micro_batch_size"].value = 6
    ex.controls["normalization"].value = "sum"
    ex.controls["spread"].value = 11
    left, right = ex.figure.axes[:2]
    heights = [b.get_height() for b in left.patches]
    assert max(heights) > 100 and max(heights) < left.get_ylim()[1]
    assert heights[0] / heights[1] > 10  # 2.4e+02 and 1.1e+01 are not drawn as equal bars
    texts = [t.get_text() for t in left.get_xticklabels()]
    assert [t.splitlines()[-1] for t in texts] == [f"{c.max_rel:.1e}" for c in ex.data["checks"]]
    for axis in (right.xaxis, right.yaxis):
        ticks = [t for t in axis.get_majorticklocs()]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_sample_weights_legend_covers_no_panel():
    """The legend sits outside the panels: inside, it hid the full-batch step it explains."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for weights in (
        {p: al.scaling.sample_weights(20, 4, 3, last_window=p) for p in al.LAST_WINDOW_POLICIES},
        {n: al.scaling.sample_weights(22, 4, 3, normalization=n) for n in ("mean", "global")},
    ):
        fig = al.scaling.plot_sample_weights(weights, title="t")
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.draw(renderer)
        assert fig.legends and not any(ax.legend_ for ax in fig.axes)
        legend = fig.legends[0].get_window_extent(renderer)
        for ax in fig.axes:
            assert not legend.overlaps(ax.get_window_extent(renderer)), ax.get_title(loc="left")


def test_token_training_full_batch_dashes_drawn_over_the_global_count():
    curves = al.scaling.token_training(
        al.TinyLM(vocab=16, dim=8), al.token_data(lengths=[3, 6, 1, 4], vocab=16), 2, 2, epochs=1
    )
    lines = {
        line.get_label(): line for line in al.scaling.plot_token_training(curves).axes[0].lines
    }
    assert lines["full batch"].get_linestyle() == "--"
    assert lines["full batch"].get_zorder() > lines["global count"].get_zorder()


def test_explorer_data_rejects_bad_spread():
    with pytest.raises(ValueError, match="spread"):
        al.scaling.loss_scaling_data(spread=12)


def test_plots_return_figures():
    ws = {p: al.scaling.sample_weights(10, 2, 2, last_window=p) for p in al.LAST_WINDOW_POLICIES}
    assert isinstance(al.scaling.plot_sample_weights(ws, title="t"), Figure)
    lengths = [3, 1, 2, 4]
    panels = {
        n: al.scaling.token_weights(lengths, n, micro_batch_size=2) for n in ("mean", "global")
    }
    assert isinstance(al.scaling.plot_token_weights(panels, lengths, micro_batch_size=2), Figure)
    checks = al.scaling.window_errors(al.Recipe(4, 3), al.mlp(seed=0), al.regression_data(n=20))
    assert isinstance(al.scaling.plot_window_errors(checks), Figure)
    rows = [{"lr": 1e-3, "relative_gap": 1e-3}, {"lr": 1e-2, "relative_gap": 1e-2}]
    assert isinstance(al.scaling.plot_linear_scaling_gap(rows), Figure)


# --- forgetting loss / k, per optimizer ----------------------------------------------------------


MATCHES = {"sgd": "k·lr, λ/k", "adam": "lr, λ/k", "adamw": "lr, λ"}


@pytest.mark.parametrize(
    "optimizer, options",
    [
        ("sgd", {}),
        ("sgd", {"momentum": 0.9}),
        ("sgd", {"momentum": 0.9, "nesterov": True}),
        ("sgd", {"momentum": 0.9, "dampening": 0.5}),
        ("adam", {}),
        ("adamw", {}),
    ],
)
@pytest.mark.parametrize("k", [3, 4])  # 4 scales exactly in binary, 3 does not
def test_forgotten_division_is_one_candidate_exactly(optimizer, options, k):
    data = al.regression_data(n=8 * k, features=4, seed=0)
    model = al.mlp(features=4, hidden=8, seed=0)
    out = al.scaling.forgotten_division(
        model, data, 8, k, optimizer=optimizer, lr=1e-3, weight_decay=0.1, epochs=5, **options
    )
    gaps = {c: d.max_rel for c, d in out["vs"].items()}
    assert list(gaps) == list(al.scaling.CANDIDATES)
    # SGD's update is linear in k·g + λθ = k·(g + (λ/k)·θ): equal to round-off; Adam up to ε
    assert gaps[MATCHES[optimizer]] <= (1e-12 if optimizer == "sgd" else 1e-4)
    assert min(g for c, g in gaps.items() if c != MATCHES[optimizer]) > 1e-2


def test_forgotten_division_without_decay_is_the_k_times_learning_rate():
    data, model = al.regression_data(n=32, features=4, seed=0), al.mlp(features=4, hidden=8)
    sgd = al.scaling.forgotten_division(model, data, 8, 4, optimizer="sgd", momentum=0.9, epochs=3)
    assert sgd["vs"]["k·lr, λ"].max_rel <= EXACT and sgd["vs"]["lr, λ"].max_rel > 1
    adam = al.scaling.forgotten_division(model, data, 8, 4, optimizer="adam", epochs=5)
    assert adam["vs"]["lr, λ"].max_rel < 1e-4 < adam["vs"]["k·lr, λ"].max_rel


def test_only_adams_eps_sees_the_missing_division():
    """Adam fed k·g with ε·k is exactly Adam fed g with ε: so ε is all that sees the factor k."""
    data, model, k = al.regression_data(n=24, features=4, seed=0), al.mlp(features=4, hidden=8), 3

    def update(normalization, eps, decay):
        def make(p):
            return torch.optim.Adam(p, lr=1e-3, eps=eps, weight_decay=decay)

        trace = al.run(al.Recipe(8, k, normalization), model, data, optimizer=make, epochs=5)
        return al.scaling.update_of(trace)

    forgetful = update("none", 1e-8 * k, 0.1)
    assert al.grad_diff(forgetful, update("mean", 1e-8, 0.1 / k)).max_rel <= 1e-9
    assert al.grad_diff(update("none", 1e-8, 0.1), update("mean", 1e-8, 0.1 / k)).max_rel > 1e-9


def test_forgotten_division_bad_options():
    data, model = al.regression_data(n=16, features=4), al.mlp(features=4, hidden=8)
    with pytest.raises(ValueError, match="optimizer"):
        al.scaling.forgotten_division(model, data, 8, 2, optimizer="lion")
    with pytest.raises(ValueError, match="weight_decay"):
        al.scaling.forgotten_division(model, data, 8, 2, weight_decay=-1.0)
    with pytest.raises(ValueError, match="nesterov.*momentum=0.0"):
        al.scaling.forgotten_division(model, data, 8, 2, nesterov=True)
    with pytest.raises(ValueError, match="SGD's options.*'adam'"):
        al.scaling.forgotten_division(model, data, 8, 2, optimizer="adam", momentum=0.9)


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_with_a_short_last_window_no_candidate_matches(optimizer):
    """The forgetful loop multiplies each window by ITS length: 3 for full windows, 2 for the short
    one (20 samples, micro-batches of 4, k = 3). No single lr and λ can undo both."""
    data = al.regression_data(n=20, features=4, seed=0)
    model = al.mlp(features=4, hidden=8, seed=0)
    out = al.scaling.forgotten_division(
        model, data, 4, 3, optimizer=optimizer, lr=1e-3, weight_decay=0.1, epochs=5
    )
    assert min(d.max_rel for d in out["vs"].values()) > 1e-2


def test_adamw_sees_the_missing_division_once_eps_is_not_negligible():
    """The gap to the matching candidate grows with ε: round-off-small at torch's default, large at
    1e-4 against gradients whose median size is a few hundredths."""
    data = al.regression_data(n=32, features=4, seed=0)
    model = al.mlp(features=4, hidden=8, seed=0)
    gaps = [
        al.scaling.forgotten_division(
            model, data, 8, 4, optimizer="adamw", lr=1e-3, weight_decay=0.1, epochs=5, eps=eps
        )["vs"]["lr, λ"].max_rel
        for eps in (None, 1e-8, 1e-6, 1e-4)
    ]
    assert gaps[0] == gaps[1] < 1e-4  # None is torch's default, 1e-8
    assert gaps[1] < gaps[2] < gaps[3] and gaps[3] > 1e-2
    median = float(al.flatten(al.full_batch_grads(model, data)).abs().median())
    assert 1e-3 < median < 0.1  # ε = 1e-4 is within two orders of magnitude of |g|


def test_multiple_of_measures_the_factor_and_what_it_leaves():
    g = {"a": torch.tensor([1.0, 2.0]).double(), "b": torch.tensor([[3.0]]).double()}
    assert al.scaling.multiple_of(al.scaling.scale_grads(g, 2 / 3), g).factor == pytest.approx(
        2 / 3, rel=EXACT
    )
    exact = al.scaling.multiple_of(al.scaling.scale_grads(g, -2.0), g)
    assert exact.factor == pytest.approx(-2.0, rel=EXACT) and exact.residual <= EXACT
    off = al.scaling.multiple_of({"a": torch.tensor([1.0, 0.0]), "b": torch.tensor([[0.0]])}, g)
    assert off.residual > 0.5  # far from any multiple
    assert str(exact).startswith("-2.0000 (residual")
    with pytest.raises(ValueError, match="same parameters"):
        al.scaling.multiple_of({"a": g["a"]}, g)
    with pytest.raises(ValueError, match="zero everywhere"):
        al.scaling.multiple_of(g, al.scaling.scale_grads(g, 0.0))


def test_class_weights_make_the_mean_divide_by_the_summed_weight_not_the_count():
    """CrossEntropyLoss(weight=w), reduction 'mean': Σ w[y]·loss / Σ w[y] over the real targets —
    so counting real tokens is the right divisor only for an unweighted loss (exercise 03.4)."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 5, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 3, -100, 4, 4, -100, 1])
    w = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25], dtype=torch.float64)
    kw = {"weight": w, "ignore_index": -100}
    summed = torch.nn.functional.cross_entropy(logits, y, reduction="sum", **kw)
    mean = torch.nn.functional.cross_entropy(logits, y, **kw)
    real = y != -100
    assert float(mean) == pytest.approx(float(summed / w[y[real]].sum()), rel=EXACT)
    assert abs(float(mean) - float(summed / real.sum())) > 0.1


class _RescaledAdam(torch.optim.Adam):
    """Adam fed each gradient element multiplied by its own random factor in [0.1, 10]."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.generator = torch.Generator().manual_seed(0)

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                noise = torch.rand(p.shape, generator=self.generator, dtype=p.dtype)
                p.grad.mul_(10 ** (2 * noise - 1))
        return super().step(closure)


def test_lesson_03_adam_check_fails_for_a_non_constant_rescaling_only_with_several_steps():
    """One Adam step is ≈ lr·sign(g): any per-element rescaling passes a < 1e-4 check. Five steps do
    not, which is why lesson 03 compares Adam over 5 steps."""
    data = al.regression_data(n=32, features=4, seed=0)
    model = al.mlp(features=4, hidden=8, seed=0)

    def gap(epochs):
        recipe = al.Recipe(8, 4)
        base = al.run(recipe, model, data, optimizer="adam", lr=1e-3, epochs=epochs)
        noisy = al.run(
            recipe, model, data, optimizer=lambda p: _RescaledAdam(p, 1e-3), epochs=epochs
        )
        return al.grad_diff(al.scaling.update_of(noisy), al.scaling.update_of(base)).max_rel

    assert gap(1) < 1e-4 < gap(5)


def test_step_every_kth_carries_the_leftover_into_the_next_epoch():
    data = al.regression_data(n=20, features=3, seed=0)
    model = al.mlp(features=3, hidden=4, seed=0)
    out = al.scaling.step_every_kth(model, data, 4, 3, epochs=2)
    assert [s["epoch"] for s in out["steps"]] == [0, 1]
    assert all(v > 0 for v in out["leftover_norm"])
    second = out["steps"][1]
    full = al.full_batch_grads(al.scaling.with_params(model, second["params"]), data)
    # 5 micro-batches (2 carried + 3 new), each ÷ 3, all at the same parameters: 20/12 of all 20
    assert al.grad_diff(second["grads"], al.scaling.scale_grads(full, 20 / 12)).max_rel <= EXACT
    # when k divides the epoch nothing is left over
    assert al.scaling.step_every_kth(model, data, 4, 5, epochs=1)["leftover_norm"] == [0.0]
    with pytest.raises(ValueError, match="params"):
        al.scaling.with_params(model, {"nope": torch.zeros(1)})


def test_accumulated_variance_is_the_big_batch_variance():
    data = al.regression_data(n=512, features=3, seed=1)
    model = al.mlp(features=3, hidden=4, seed=0)
    var = al.scaling.gradient_variance(model, data, 4, 4, draws=60)
    assert var["max_rel"] <= EXACT
    assert var["accumulated"] == pytest.approx(var["big"], rel=EXACT)
    assert 0.5 * 4 < var["micro"] / var["accumulated"] < 2 * 4
    with pytest.raises(ValueError, match="exceeds"):
        al.scaling.gradient_variance(model, data, 64, 16)
    with pytest.raises(ValueError, match="draws"):
        al.scaling.gradient_variance(model, data, 4, 4, draws=1)


# --- training with each normalisation; the symptom table's "slower" row ---------------------------


@pytest.mark.slow
def test_token_training_global_is_the_full_batch_and_mean_of_means_ends_higher():
    """Lesson 03 says: the global count trains the full-batch model; the mean of means ends above
    it on the token mean — on its seed 0 and on each of these 8 seeds."""
    for seed in range(8):
        curves = al.scaling.token_training(
            al.TinyLM(vocab=16, dim=8, seed=seed),
            al.token_data(n=32, min_len=1, max_len=40, vocab=16, seed=seed),
            2,
            4,
            epochs=12,
        )
        assert len(curves["epoch"]) == 13 and curves["epoch"][-1] == 12
        for full, glob in zip(curves["full batch"], curves["global count"], strict=True):
            assert glob == pytest.approx(full, rel=1e-9)
        mean, glob = curves["mean of means"], curves["global count"]
        assert mean[0] == glob[0]  # the same start
        assert all(m > g for m, g in zip(mean[1:], glob[1:], strict=True)), seed
        assert glob[-1] < glob[0]  # it trains


def test_token_training_equal_lengths_make_the_three_ways_one():
    curves = al.scaling.token_training(
        al.TinyLM(vocab=16, dim=8), al.token_data(lengths=[6] * 16, vocab=16), 2, 4, epochs=3
    )
    for way in al.scaling.TRAINING_WAYS:
        assert curves[way] == pytest.approx(curves["full batch"], rel=1e-9)


@pytest.mark.slow
def test_zeroing_inside_the_window_trains_but_slower_than_the_big_batch():
    """The symptom table's row: the loss falls, but slower than the big-batch run."""
    for seed in range(6):
        data = al.regression_data(n=64, features=4, seed=seed)
        model = al.mlp(features=4, hidden=8, seed=seed)
        curves = {}
        for name, recipe in {
            "big": al.Recipe(16),
            "right": al.Recipe(4, 4),
            "zeroed": al.Recipe(4, 4, zero_grad="every_micro_step"),
        }.items():
            trace = al.run(recipe, model, data, optimizer="sgd", lr=0.1, epochs=10)
            after = [al.scaling.with_params(model, p) for p in trace.params[3::4]]  # epoch ends
            curves[name] = [al.scaling.mean_loss(m, data) for m in after]
        assert curves["right"] == pytest.approx(curves["big"], rel=1e-9)
        start = al.scaling.mean_loss(model, data)
        assert curves["zeroed"][-1] < start  # it falls...
        assert all(z > b for z, b in zip(curves["zeroed"], curves["big"], strict=True)), seed


def test_unpadded_gives_each_sequence_its_real_tokens():
    data = al.token_data(lengths=[3, 0, 5], vocab=8, seed=0)
    seqs = al.scaling.unpadded(data)
    assert [len(x) for x, _ in seqs] == [3, 0, 5] == [len(y) for _, y in seqs]
    assert torch.equal(seqs[2][0], data.x[2, :5]) and torch.equal(seqs[2][1], data.y[2, :5])
    assert all((y != al.IGNORE_INDEX).all() for _, y in seqs)
    with pytest.raises(ValueError, match="token data"):
        al.scaling.unpadded(al.regression_data(n=4))
    holed = al.Data(data.x.clone(), data.y.clone())
    holed.y[2, 1] = al.IGNORE_INDEX
    with pytest.raises(ValueError, match="row 2"):
        al.scaling.unpadded(holed)


# --- one integer rule: numpy integers and 0-d tensors are integers, bool and float are not -------


def test_counts_accept_numpy_and_tensor_integers():
    import numpy as np

    expected = al.scaling.token_weights([3, 4])
    assert torch.equal(al.scaling.token_weights(np.array([3, 4])), expected)
    assert torch.equal(al.scaling.token_weights([np.int64(3), torch.tensor(4)]), expected)
    assert torch.equal(al.scaling.token_weights(torch.tensor([3, 4])), expected)
    assert al.scaling.combined_loss(np.array([30, 70]), np.array([2.0, 1.0])) == pytest.approx(1.3)
    assert al.scaling.sample_weights(np.int64(8), np.int64(2), 2).per_item.shape == (8,)
    data = al.scaling.loss_scaling_data(np.int64(3), np.int64(3), spread=np.int64(2))
    assert data["lengths"] == al.scaling.loss_scaling_data(3, 3, spread=2)["lengths"]
    for bad in ([3.0, 4], [True, 4], [np.float64(3.0), 4]):
        with pytest.raises(ValueError, match=r"lengths\[0\]"):
            al.scaling.token_weights(bad)


# --- Accelerate's short last window needs a prepared loader ---------------------------------------


@pytest.mark.slow
def test_accelerate_steps_at_the_end_of_the_loader_only_when_prepared():
    """20 samples, micro-batch 4, k = 3, 2 epochs: a prepared loader steps at each epoch's end
    (after micro-batches 2, 4, 7, 9); a plain DataLoader counts on across epochs (2, 5, 8)."""
    pytest.importorskip("accelerate")
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState
    from torch.utils.data import DataLoader, TensorDataset

    def steps(prepared: bool) -> list[int]:
        AcceleratorState._reset_state(True)
        GradientState._reset_state()
        acc = Accelerator(gradient_accumulation_steps=3, cpu=True)
        model = torch.nn.Linear(1, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(0)
        dataset = TensorDataset(torch.randn(20, 1, generator=g), torch.randn(20, 1, generator=g))
        loader = DataLoader(dataset, batch_size=4)
        if prepared:
            model, opt, loader = acc.prepare(model, opt, loader)
        else:
            model, opt = acc.prepare(model, opt)
        seen, i = [], 0
        for _ in range(2):
            for x, y in loader:
                with acc.accumulate(model):
                    acc.backward(torch.nn.functional.mse_loss(model(x), y))
                    if acc.sync_gradients:
                        seen.append(i)
                    opt.step()
                    opt.zero_grad()
                i += 1
        AcceleratorState._reset_state(True)
        GradientState._reset_state()
        return seen

    assert steps(prepared=True) == [2, 4, 7, 9]
    assert steps(prepared=False) == [2, 5, 8]


# --- Accelerate's recipe for variable-size samples ------------------------------------------------


@pytest.mark.slow
def test_accelerates_variable_size_recipe_gives_the_full_batch_gradient_per_window():
    """The guide's loop on one process: each window fetched first, its count gathered, each summed
    loss × gradient_accumulation_steps × num_processes / N into accelerator.backward (which
    divides by the steps): every window, the short one too, gets its full-batch gradient."""
    pytest.importorskip("accelerate")
    from itertools import islice

    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState

    data = al.token_data(lengths=[3, 9, 1, 14, 6, 2, 11, 5, 8, 4], vocab=16, seed=0)
    k = 3  # micro-batches of 2: windows of 3 and 2 micro-batches

    def windows(scale_by_steps: bool) -> list[dict]:
        AcceleratorState._reset_state(True)
        GradientState._reset_state()
        acc = Accelerator(gradient_accumulation_steps=k, cpu=True)
        model = al.TinyLM(vocab=16, dim=8, seed=0)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)  # the model stays where it is
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(data.x, data.y), batch_size=2
        )
        model, opt, loader = acc.prepare(model, opt, loader)
        batches, out = iter(loader), []
        while window := list(islice(batches, k)):
            local = sum((y != al.IGNORE_INDEX).sum() for _, y in window)
            n_items = acc.gather(local.reshape(1)).sum().item()
            for x, y in window:
                logits = model(x)
                loss = torch.nn.functional.cross_entropy(
                    logits.flatten(0, 1), y.flatten(), reduction="sum"
                )
                factor = k * acc.num_processes if scale_by_steps else acc.num_processes
                acc.backward(loss * factor / n_items)
            out.append(al.grads_of(acc.unwrap_model(model)))
            opt.step()
            opt.zero_grad()
        AcceleratorState._reset_state(True)
        GradientState._reset_state()
        return out

    lm = al.TinyLM(vocab=16, dim=8, seed=0)
    full = [al.full_batch_grads(lm, data[:6], loss="cross_entropy")]
    full.append(al.full_batch_grads(lm, data[6:], loss="cross_entropy"))
    guide = windows(scale_by_steps=True)
    assert all(al.grad_diff(g, f).max_rel <= EXACT for g, f in zip(guide, full, strict=True))
    without = windows(scale_by_steps=False)  # forgetting × steps: backward's ÷ k stays
    for g, f in zip(without, full, strict=True):
        assert al.scaling.multiple_of(g, f).factor == pytest.approx(1 / k, rel=1e-9)
