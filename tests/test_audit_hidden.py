"""al.audit on bugs that hide: composed bugs, checks that clipping blinds, last-window policies,
messages derived from measurements, graphs kept alive, logging forwards, the silent AMP order."""

import pytest
import torch
import torch.nn.functional as F

import accumlab as al


def _loop(name):
    return al.audit.catalogue_loop(name).fn


def test_composed_bugs_are_all_named_and_match_exactly():
    setup = al.audit.audit_setup()
    report = al.audit(_loop("zero_grad_and_undivided"), **setup)
    assert report.codes == {"ZERO_GRAD_IN_WINDOW", "LOSS_NOT_DIVIDED"}, str(report)
    # step 0 ran at the initial parameters: the optimizer saw micro-batch 3's own undivided mean
    # gradient, so the measured ratio is ‖M_3‖ / ‖mean over micro-batches 0-3‖, computed here anew
    model, data = setup["model"], setup["data"]
    last = al.full_batch_grads(model, data[12:16])
    window = al.full_batch_grads(model, data[0:16])
    norm = lambda g: float(torch.cat([v.reshape(-1) for v in g.values()]).norm())  # noqa: E731
    ratio = report["LOSS_NOT_DIVIDED"].evidence["‖seen‖ / ‖reference‖"][0]
    assert ratio == pytest.approx(norm(last) / norm(window), rel=1e-12)
    assert "Together with ZERO_GRAD_IN_WINDOW" in report["LOSS_NOT_DIVIDED"].message
    assert "only the last 1 of the window's 4 micro-batches" in report["LOSS_NOT_DIVIDED"].message


def test_never_zeroed_and_undivided_compose():
    def both(model, optimizer, batches, k):
        for i, (x, y) in enumerate(batches):
            F.mse_loss(model(x), y).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                optimizer.step()

    report = al.audit(both, **al.audit.audit_setup())
    assert report.codes == {"GRADS_NEVER_ZEROED", "LOSS_NOT_DIVIDED"}, str(report)
    # step 0 has nothing to carry: only the missing division shows there
    assert report["GRADS_NEVER_ZEROED"].steps == (1, 2, 3, 4, 5)
    assert report["LOSS_NOT_DIVIDED"].steps == (0, 1, 2, 3, 4, 5)


def _clipped(weighting):
    """A loop clipping once per window, with its own loss division."""

    def loop(model, optimizer, batches, k, *, max_norm):
        for i, (x, y) in enumerate(batches):
            window = min(k, len(batches) - (i - i % k))
            F.mse_loss(model(x), y).div(weighting(k, window)).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
                optimizer.zero_grad()

    return loop


@pytest.mark.parametrize(
    ("weighting", "code"),
    [
        (lambda k, window: 1, "LOSS_NOT_DIVIDED"),
        (lambda k, window: k, "LAST_WINDOW_UNDERWEIGHTED"),
        (lambda k, window: window, None),
    ],
    ids=["undivided", "divide_by_k", "correct"],
)
def test_clipping_that_bites_prefers_the_best_match(weighting, code):
    # max_norm = 1 bites at every step (norms before clipping 2.3-3.0): only clip_grad_norm_'s
    # 1e-6 epsilon tells the scales apart, and in float64 the right hypothesis matches to 1e-16
    setup = al.audit.audit_setup(max_norm=1.0)
    for rtol in (None, 1e-6):  # the default, and the loose tolerance that once hid these bugs
        report = al.audit(_clipped(weighting), **setup, rtol=rtol)
        assert report.codes == ({code} if code else set()), str(report)
        if code:
            assert "epsilon" in report[code].message


def test_clipping_that_bites_in_float32_is_reported_not_verifiable_with_the_way_out():
    setup = al.audit.audit_setup("float32", max_norm=1.0)
    report = al.audit(_clipped(lambda k, window: 1), **setup)
    assert report.codes == {"GRADIENT_NOT_VERIFIED"} and not report.ok, str(report)
    finding = report["GRADIENT_NOT_VERIFIED"]
    assert "LOSS_NOT_DIVIDED" in finding.evidence["could be"]
    assert "neither" in finding.message
    # the correct loop cannot be told apart either: the audit says so instead of passing it
    correct = al.audit(_clipped(lambda k, window: window), **setup)
    assert correct.codes == {"GRADIENT_NOT_VERIFIED"}, str(correct)
    # the suggested max_norm makes clipping idle: then the scale is measured
    suggested = float(finding.message.split("max_norm above ")[1].split(" ")[0])
    setup["max_norm"] = suggested
    assert al.audit(_clipped(lambda k, window: 1), **setup).codes == {"LOSS_NOT_DIVIDED"}
    assert al.audit(_clipped(lambda k, window: window), **setup).findings == []


def test_last_window_policies_are_graded_named_and_can_be_stated():
    under = al.audit.catalogue_loop("last_window_underweighted").audit()
    finding = under["LAST_WINDOW_UNDERWEIGHTED"]
    assert finding.severity == "policy" and under.ok
    assert "2/4 = 0.5" in finding.message
    assert "Accelerate" in finding.message and "Lightning" in finding.message
    stated = al.audit.audit_setup(last_window="divide_by_k")
    assert al.audit(_loop("last_window_underweighted"), **stated).findings == []
    # stating a policy the loop does not follow is reported, with the measured weight
    averaged = al.audit(_loop("correct_loop"), **stated)
    assert averaged.codes == {"LAST_WINDOW_AVERAGED"}
    assert "4/2 = 2" in averaged["LAST_WINDOW_AVERAGED"].message
    dropped = al.audit.catalogue_loop("last_window_dropped").audit()["LAST_WINDOW_DROPPED"]
    assert dropped.severity == "policy" and 'last_window="drop"' in dropped.message
    assert "32 of its 40 samples" in dropped.message
    drop = al.audit.audit_setup(last_window="drop")
    assert al.audit(_loop("last_window_dropped"), **drop).findings == []
    kept = al.audit(_loop("correct_loop"), **drop)
    assert kept.codes == {"LAST_WINDOW_KEPT"} and kept.expected_steps == (4, 8, 14, 18)


def test_scheduler_messages_follow_the_measurement():
    before = al.audit.catalogue_loop("scheduler_before_optimizer").audit()
    text = before["SCHEDULER_BEFORE_STEP"].message
    assert "not once per optimizer step" not in text and "before optimizer.step()" in text
    per_micro = al.audit.catalogue_loop("scheduler_every_micro_batch").audit()
    text = per_micro["SCHEDULER_PER_MICRO_BATCH"].message
    # 10 calls for 3 steps is 3.33 over the epoch; the steady rate is k = 4 per window
    assert "4× too fast" in text and "3.33" not in text


def test_off_by_one_advice_comes_from_the_measured_positions():
    def one_based(model, optimizer, batches, k):
        for i, (x, y) in enumerate(batches, 1):
            (F.mse_loss(model(x), y) / k).backward()
            if (i + 1) % k == 0 or i == len(batches):  # adds 1 to a counter already from 1
                optimizer.step()
                optimizer.zero_grad()

    report = al.audit(one_based, **al.audit.audit_setup())
    assert report.codes == {"OFF_BY_ONE_SCHEDULE"}, str(report)
    text = report["OFF_BY_ONE_SCHEDULE"].message
    assert report.seen_steps == (3, 7, 10, 13, 17, 20) and "[3, 7, 10]" in text
    assert "enumerate(batches, 1)" in text and "i % k == 0" in text
    assert "first window held 3 micro-batch(es)" in text and "3/4 of a full window" in text
    zero_based = al.audit.catalogue_loop("off_by_one_schedule").audit()
    text = zero_based["OFF_BY_ONE_SCHEDULE"].message
    assert "Micro-batch(es) (counting from 1 over the run) [20] were forwarded after the" in text
    # the first epoch's leftover micro-batch 10 joins the second epoch's first window
    assert "the first window also held the micro-batch(es) forwarded after the previous" in text


def test_blind_spots_are_seen():
    amp = al.audit.catalogue_loop("unscale_and_update_every_micro_batch").audit()
    assert amp.codes == {"UNSCALE_MISUSE", "SCALER_MISUSE"}
    weights = amp["UNSCALE_MISUSE"].message.split("weights ")[1]
    assert weights.startswith("[") and "instead of 1" in weights
    zeroed = al.audit.catalogue_loop("zero_grad_before_step").audit()
    assert zeroed.codes == {"ZERO_GRAD_BEFORE_STEP"} and "nan" not in str(zeroed)
    assert "no parameter moved" in zeroed.findings[0].message
    graphs = al.audit.catalogue_loop("total_loss_keeps_graphs").audit()["GRAPHS_KEPT_ALIVE"]
    # every earlier window's 4 graphs are alive at the next step: 0, then 4, then 8; the total is
    # the function's local, so a new epoch (a new call) starts from none again
    assert graphs.evidence["graphs of earlier windows alive at each step"] == [0, 4, 8] * 2
    logging = al.audit.catalogue_loop("logging_forward_with_grad").audit()
    assert logging.codes == {"FORWARD_WITHOUT_BACKWARD"} and logging.ok
    assert logging.seen_steps == logging.expected_steps  # counted in micro-batches
    assert "no_sync" in al.audit.catalogue_loop("correct_loop").audit().scope()


def test_graphs_kept_with_their_activations_report_the_saved_bytes():
    kept = []

    def keeps_outputs(model, optimizer, batches, k):
        for i, (x, y) in enumerate(batches):
            window = min(k, len(batches) - (i - i % k))
            out = model(x)
            kept.append(model(x))  # a second forward, kept with its graph, never backpropagated
            (F.mse_loss(out, y) / window).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                counts.append(len(kept))  # forwards kept alive when this step runs
                optimizer.step()
                optimizer.zero_grad()

    counts = []
    found = al.audit(keeps_outputs, **al.audit.audit_setup())["GRAPHS_KEPT_ALIVE"]
    held = found.evidence["saved bytes alive at each step"]
    assert len(counts) == len(held)  # one audited run: the loop called once per epoch
    kept.clear()
    # every kept forward's saved activations stay: the same bytes per forward, at every step
    per = held[0] // counts[0]
    assert per > 0 and held == [per * n for n in counts]
    assert f"They still hold {max(held)} bytes" in found.message


def test_clean_loops_keep_no_graph_and_detached_logging_is_clean():
    def detached_total(model, optimizer, batches, k):
        total = 0.0
        for i, (x, y) in enumerate(batches):
            loss = F.mse_loss(model(x), y) / min(k, len(batches) - (i - i % k))
            loss.backward()
            total += loss.item()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                optimizer.step()
                optimizer.zero_grad()

    assert al.audit(detached_total, **al.audit.audit_setup()).findings == []
