"""What the audit says when explanations coincide at one step, and when nothing explains a
difference: a double division is not attributed to a last-window policy; an unexplained
difference in the reference's direction is a normaliser, a small one in nearly its direction is
rounding that a looser rtol accepts."""

import pytest
import torch
import torch.nn.functional as F

import accumlab as al
from accumlab.audit.unexplained import EPSILON_ONLY


def test_a_double_division_is_one_bug_at_every_step_even_where_a_policy_fits_too():
    setup = al.audit.audit_setup()
    k = setup["accumulation_steps"]
    report = al.audit.catalogue_loop("loss_divided_twice").audit()
    # at the short window of 2 (k = 4), 1/n² = 1/4 is also what divide_by_k gives (n / k = 2/4):
    # the steps with full windows established the double division, so it is taken there too
    assert report.codes == {"LOSS_DIVIDED_TWICE"}, str(report)
    finding = report["LOSS_DIVIDED_TWICE"]
    sizes = finding.evidence["window sizes"]
    assert sizes == [4, 4, 2] * 2 and 2 * 2 == k  # the coincidence n² = k is real here
    assert finding.evidence["‖seen‖ / ‖reference‖"] == pytest.approx([1 / n for n in sizes])
    assert "LAST_WINDOW_UNDERWEIGHTED" not in str(report)


def test_divide_by_k_alone_is_still_the_documented_policy():
    report = al.audit.catalogue_loop("last_window_underweighted").audit()
    assert report.codes == {"LAST_WINDOW_UNDERWEIGHTED"} and report.ok, str(report)


def test_a_constant_factor_is_named_as_one():
    text = al.audit.catalogue_loop("stray_factor").audit()["UNEXPLAINED_GRADIENT"].message
    assert "Same direction, wrong scale" in text and "the same factor 0.7 at every step" in text


def test_a_normaliser_that_counts_padding_is_recognised_from_the_data():
    setup = al.audit.audit_setup("tokens")
    report = al.audit.catalogue_loop("normaliser_counts_padding").audit()
    assert report.codes == {"UNEXPLAINED_GRADIENT"}, str(report)
    finding = report["UNEXPLAINED_GRADIENT"]
    # each window's real tokens / all its positions, counted here from the data
    batches = setup["data"].micro_batches(setup["micro_batch_size"])
    k = setup["accumulation_steps"]
    windows = [batches[i : i + k] for i in range(0, len(batches), k)] * 2  # two epochs
    fractions = [
        sum(int((b.y != -100).sum()) for b in w) / sum(b.y.numel() for b in w) for w in windows
    ]
    assert finding.evidence["‖seen‖ / ‖reference‖"] == pytest.approx(fractions, rel=1e-9)
    assert all(c > 1 - 1e-12 for c in finding.evidence["cosine"])
    assert "counts the padding positions too" in finding.message
    assert [round(f, 2) for f in fractions[:3]] == [0.61, 0.6, 0.46]


def test_bfloat16_rounding_gets_an_rtol_hint_that_works_and_still_sees_a_bug():
    report = al.audit.catalogue_loop("bfloat16_autocast").audit()
    assert report.codes == {"UNEXPLAINED_GRADIENT"}, str(report)
    finding = report["UNEXPLAINED_GRADIENT"]
    worst = max(finding.evidence["relative L2 difference"])
    assert 1e-3 < worst < 1e-2  # above float32's and float16's tolerances, below bfloat16's
    assert min(finding.evidence["cosine"]) > 0.9999
    text = finding.message
    suggested = float(text.split("such as rtol=")[1].split(";")[0])
    assert suggested >= 2 * worst and "rounding" in text
    setup = al.audit.audit_setup("float32", rtol=suggested)
    assert al.audit(al.audit.catalogue_loop("bfloat16_autocast").fn, **setup).findings == []

    def undivided_in_bfloat16(model, optimizer, batches, k):
        for i, (x, y) in enumerate(batches):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                prediction = model(x)
            F.mse_loss(prediction.float(), y).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                optimizer.step()
                optimizer.zero_grad()

    assert al.audit(undivided_in_bfloat16, **setup).codes == {"LOSS_NOT_DIVIDED"}


def test_autocast_changes_nothing_on_the_float64_setup():
    # the float64 setup: autocast casts float32 operations only, so the loop is exact there
    report = al.audit(al.audit.catalogue_loop("bfloat16_autocast").fn, **al.audit.audit_setup())
    assert report.findings == [] and max(c.rel_error for c in report.checks) < 1e-12


def test_an_unexplained_difference_of_no_particular_shape_gets_no_hint():
    def stray_noise(model, optimizer, batches, k):
        generator = torch.Generator().manual_seed(0)
        for i, (x, y) in enumerate(batches):
            window = min(k, len(batches) - (i - i % k))
            (F.mse_loss(model(x), y) / window).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                for p in model.parameters():
                    p.grad += 0.05 * torch.randn(p.shape, generator=generator, dtype=p.dtype)
                optimizer.step()
                optimizer.zero_grad()

    report = al.audit(stray_noise, **al.audit.audit_setup())
    text = report["UNEXPLAINED_GRADIENT"].message
    assert "Same direction" not in text and "rounding" not in text


def _clipped_loop(how: str):
    """The capstone's correct loop, its clipping done by `how`: "by hand" (max_norm / norm, no
    epsilon), "scaled" (clip_grad_norm_ on still-scaled gradients with max_norm × scale)."""

    def loop(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
        for i, (x, y) in enumerate(batches):
            window = min(k, len(batches) - (i - i % k))
            scaler.scale(F.mse_loss(model(x), y) / window).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                if how == "by hand":
                    scaler.unscale_(optimizer)
                    total = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm()
                    for p in model.parameters():
                        p.grad *= min(1.0, max_norm / float(total))
                else:
                    torch.nn.utils.clip_grad_norm_(
                        model.parameters(), max_norm * scaler.get_scale()
                    )
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad()

    return loop


CAPSTONE = {"max_norm": 0.5, "scheduler": True, "scaler": True}


def test_ratios_are_against_the_clipped_reference():
    # no ÷k under max_norm = 1: both updates have norm 1, so the ratio is 1, not ‖seen‖ / the
    # unclipped mean (0.16-0.33 here)
    report = al.audit.catalogue_loop("undivided_under_clipping").audit()
    ratios = report["LOSS_NOT_DIVIDED"].evidence["‖seen‖ / ‖reference‖"]
    assert ratios == pytest.approx([1] * 6, abs=1e-5)
    # clipping before unscale_: the first step is 1/scale of the clipped reference, exactly
    start = al.audit(_starting_point, **al.audit.audit_setup(**CAPSTONE))
    first = start["UNSCALE_MISUSE"].evidence["‖seen‖ / ‖reference‖"][0]
    assert first == pytest.approx(1 / 1024, rel=1e-6)


def _setup_of(**options):
    """The Setup al.audit builds for the regression setup with `options`."""
    kw = al.audit.audit_setup(**options)
    return al.audit.spec.Setup(
        kw["model"],
        kw["data"].micro_batches(kw["micro_batch_size"]),
        kw["accumulation_steps"],
        al.losses.get_loss("mse"),
        0.1,
        options.get("max_norm"),
        options.get("scheduler", False),
        options.get("scaler", False),
        al.audit.spec.default_rtol(kw["model"]),
        "divide_by_actual",
        2,
    )


def _starting_point(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
    for i, (x, y) in enumerate(batches):
        scaler.scale(F.mse_loss(model(x), y) / k).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad()


@pytest.mark.parametrize("how", ["by hand", "scaled"])
def test_clipping_done_another_way_is_named_not_blamed_on_the_normaliser(how):
    report = al.audit(_clipped_loop(how), **al.audit.audit_setup(**CAPSTONE))
    finding = report["CLIPPED_ANOTHER_WAY"]  # a note: measured again where clipping cannot bite
    assert report.codes == {"CLIPPED_ANOTHER_WAY"} and report.ok, str(report)
    assert "normaliser" not in finding.message and "1e-6 epsilon" in finding.message
    # the first run's difference is only the epsilon: UNEXPLAINED_GRADIENT flagged it as such
    first = al.audit.auditor._audit(
        _clipped_loop(how), _setup_of(**CAPSTONE), "cpu", time_limit=10.0
    )
    assert first["UNEXPLAINED_GRADIENT"].evidence[EPSILON_ONLY] is True
    # a real normaliser bug under the same clipping is not taken for an epsilon
    stray = al.audit.catalogue_loop("stray_factor")
    unclipped = al.audit(stray.fn, **al.audit.audit_setup())["UNEXPLAINED_GRADIENT"]
    assert EPSILON_ONLY not in unclipped.evidence
    # and 08.3 accepts both: where clipping cannot bite their scale is measured right
    assert al.check("08.3", _clipped_loop(how)).ok


def test_the_short_window_policy_message_weighs_samples_as_the_weights_do():
    message = (
        al.audit.catalogue_loop("last_window_underweighted")
        .audit()["LAST_WINDOW_UNDERWEIGHTED"]
        .message
    )
    # divide_by_k gives every sample the same weight; divide_by_actual doubles the short window's
    by_k = al.scaling.sample_weights(40, 4, 4, last_window="divide_by_k").per_item
    by_actual = al.scaling.sample_weights(40, 4, 4, last_window="divide_by_actual").per_item
    assert len(set(by_k.tolist())) == 1 and by_actual[-1] == 2 * by_actual[0]
    assert "each of its samples weighs what a sample of a full window weighs" in message
    assert "then weigh 4/2 times as much as the others" in message
    assert "To weigh every sample equally" not in message


def test_a_window_backpropagated_at_once_is_seen_keeping_its_graphs_together():
    def one_backward(model, optimizer, batches, k):
        for s in range(0, len(batches), k):
            window = batches[s : s + k]
            out = torch.cat([model(x) for x, _ in window])
            F.mse_loss(out, torch.cat([y for _, y in window])).backward()
            optimizer.step()
            optimizer.zero_grad()

    assert al.audit(one_backward, **al.audit.audit_setup()).graphs_together == 4
    assert al.audit.catalogue_loop("correct_loop").audit().graphs_together == 1

    def summed_tokens(model, optimizer, batches, k):  # 08.2's weights, one backward per window
        for s in range(0, len(batches), k):
            window = batches[s : s + k]
            tokens = sum(int((y != -100).sum()) for _, y in window)
            losses = [
                F.cross_entropy(
                    model(x).flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum"
                )
                for x, y in window
            ]
            (sum(losses) / tokens).backward()
            optimizer.step()
            optimizer.zero_grad()

    assert al.audit(summed_tokens, **al.audit.audit_setup("tokens")).findings == []  # weights right
    result = al.check("08.2", summed_tokens)
    assert not result.ok and "alive together" in result.message
