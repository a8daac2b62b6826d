"""What the audit can and cannot see: gradient through no forward of model(x), updates a GradScaler
skipped, clipping computed another way, an autocast PyTorch switched off, the audit's own
GradScaler, and data changed in place through views."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import accumlab as al
from accumlab.audit.runner import record

CAPSTONE = {"max_norm": 0.5, "scheduler": True, "scaler": True}


def _hidden_full_batch(model, optimizer, batches, k):
    """Gaming the hooks: a decoy backward per micro-batch adds 0; the window's real gradient comes
    from one big-batch backward through model.forward, which no hook sees."""
    for s in range(0, len(batches), k):
        window = batches[s : s + k]
        for x, _ in window:
            (model(x).sum() * 0).backward()
        x, y = torch.cat([x for x, _ in window]), torch.cat([y for _, y in window])
        F.mse_loss(model.forward(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()


def test_gradient_through_no_forward_of_the_model_is_an_error_not_a_clean_report():
    report = al.audit(_hidden_full_batch, **al.audit.audit_setup("uneven"))
    assert report.codes == {"FORWARD_NOT_SEEN"} and not report.ok, str(report)
    finding = report["FORWARD_NOT_SEEN"]
    assert finding.evidence["backward passes through no forward of model(...)"] == 8  # 8 windows
    assert all(n > 0 for n in finding.evidence["gradient norm each added"])
    assert "model.forward(x)" in finding.message and "Call model(x)" in finding.message
    # a right loop written with model.forward gets the same words, not an unexplained schedule
    right = al.audit.catalogue_loop("calls_model_forward").audit()
    assert right.codes == {"FORWARD_NOT_SEEN"}
    assert right["FORWARD_NOT_SEEN"].evidence["forwards seen"] == 0
    # and a loop whose every backward starts at model(x) is clean (autograd.grad included)
    assert al.audit.catalogue_loop("correct_loop").audit().findings == []


def test_a_backward_from_any_tensor_the_model_returned_is_seen():
    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = al.mlp(features=4, hidden=8, depth=1, seed=0)

        def forward(self, x):
            out = self.body(x)
            return {"aux": out * 0, "prediction": out}  # the loss uses the second one only

    def loop(model, optimizer, batches, k):
        for x, y in batches:
            F.mse_loss(model(x)["prediction"], y).backward()
            optimizer.step()
            optimizer.zero_grad()

    setup = al.audit.audit_setup()
    batches = setup["data"].micro_batches(4)
    rec = record(
        loop, TwoHeads(), batches, 4, optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1)
    )
    assert rec.error is None and rec.untracked == []
    assert rec.backpropagated == set(range(len(batches)))


def test_a_model_on_the_meta_device_is_refused_at_the_boundary():
    setup = al.audit.audit_setup()
    setup["model"] = setup["model"].to("meta")
    with pytest.raises(ValueError, match="model.*meta"):
        al.audit(al.audit.catalogue_loop("correct_loop").fn, **setup)


def test_updates_the_gradscaler_skipped_are_steps_not_merged_windows():
    loop = al.audit.catalogue_loop("float16_autocast_overflows")
    report = loop.audit()
    assert report.codes == {"SCALER_SKIPPED_STEPS"} and report.ok, str(report)
    # a skipped update still closes its window: the schedule is the reference's
    assert report.seen_steps == report.expected_steps
    skipped = report["SCALER_SKIPPED_STEPS"].evidence["skipped steps"]
    assert 0 < len(skipped) < len(report.checks)
    # skipped steps are not compared, every other one matches within float16's rounding
    compared = [c for c in report.checks if c.rel_error is not None]
    assert [c.index for c in report.checks if c.rel_error is None] == skipped
    assert compared and all(c.rel_error <= report.rtol for c in compared)


def test_a_skipped_first_update_names_pytorchs_scheduler_warning():
    setup = al.audit.audit_setup("overflow", scaler=True, scheduler=True, rtol=3e-3)
    setup["data"] = al.Data(setup["data"].x, setup["data"].y * 10)  # 300 × the regression targets
    report = al.audit(al.audit.catalogue_loop("float16_autocast_overflows").fn, **setup)
    finding = report["SCALER_SKIPPED_STEPS"]
    assert finding.evidence["skipped steps"][0] == 0, str(report)
    assert "lr_scheduler.step()" in finding.message
    assert "SCHEDULER_STEPS_WRONG" not in report.codes and "NON_FINITE" not in report.codes


def test_an_overflow_the_gradscaler_did_not_catch_is_still_non_finite():
    def no_check(model, optimizer, batches, k, *, scaler, scheduler):
        for i, (x, y) in enumerate(batches):
            with torch.autocast("cpu", dtype=torch.float16):
                prediction = model(x)
            scaler.scale(F.mse_loss(prediction.float(), y) / k).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                scaler.unscale_(optimizer)
                optimizer.step()  # no inf/NaN check: the overflow reaches the weights
                scaler.update()
                scheduler.step()
                optimizer.zero_grad()

    setup = al.audit.audit_setup("overflow", scaler=True, scheduler=True, rtol=3e-3)
    report = al.audit(no_check, **setup)
    assert "NON_FINITE" in report.codes and "SCALER_SKIPPED_STEPS" not in report.codes


def _clipped_by_hand(divided: bool):
    def loop(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
        for i, (x, y) in enumerate(batches):
            window = min(k, len(batches) - (i - i % k)) if divided else 1
            scaler.scale(F.mse_loss(model(x), y) / window).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                scaler.unscale_(optimizer)
                total = float(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm())
                for p in model.parameters():
                    p.grad *= min(1.0, max_norm / total)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad()

    return loop


def test_clipping_by_hand_is_a_note_and_its_scale_is_measured_where_it_cannot_bite():
    right = al.audit(_clipped_by_hand(True), **al.audit.audit_setup(**CAPSTONE))
    assert right.codes == {"CLIPPED_ANOTHER_WAY"} and right.ok, str(right)
    note = right["CLIPPED_ANOTHER_WAY"]
    assert note.evidence["max_norm of the second run"] > 100 * CAPSTONE["max_norm"]
    assert "every step matched" in note.message
    # the same clip on an undivided loss: the second run measures the missing division
    wrong = al.audit(_clipped_by_hand(False), **al.audit.audit_setup(**CAPSTONE))
    assert wrong.codes == {"CLIPPED_ANOTHER_WAY", "LOSS_NOT_DIVIDED"} and not wrong.ok
    ratios = wrong["LOSS_NOT_DIVIDED"].evidence["‖seen‖ / ‖reference‖"]
    assert ratios == pytest.approx([4, 4, 2] * 2, rel=1e-9)
    assert al.check("08.3", _clipped_by_hand(True)).ok
    assert not al.check("08.3", _clipped_by_hand(False)).ok


def test_08_3s_hint_for_a_scale_bug_under_clipping_shows_the_unclipped_ratio():
    def undivided(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
        for i, (x, y) in enumerate(batches):
            scaler.scale(F.mse_loss(model(x), y)).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad()

    clipped = al.audit(undivided, **al.audit.audit_setup(**CAPSTONE))["LOSS_NOT_DIVIDED"]
    assert clipped.evidence["‖seen‖ / ‖reference‖"] == pytest.approx([1] * 6, abs=1e-5)
    hint = al.check("08.3", undivided).message
    assert "[4, 4, 2, 4, 4, 2]" in hint and "where clipping does not bite" in hint, hint


def test_autocast_switched_off_is_said_and_the_loop_still_checked():
    def cuda_autocast(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
        for i, (x, y) in enumerate(batches):
            window = min(k, len(batches) - (i - i % k))
            with torch.autocast("cuda", dtype=torch.float16):  # no CUDA here: switched off
                prediction = model(x)
            scaler.scale(F.mse_loss(prediction.to(y.dtype), y) / window).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad()

    if torch.cuda.is_available():
        pytest.skip("CUDA autocast runs here")
    report = al.audit(cuda_autocast, **al.audit.audit_setup(**CAPSTONE))
    assert report.codes == {"AUTOCAST_DISABLED"} and report.ok, str(report)
    assert "Disabling autocast" in report["AUTOCAST_DISABLED"].message
    assert "float64" in report["AUTOCAST_DISABLED"].message


def test_cuda_autocast_around_cpu_tensors_is_said_though_pytorch_warns_nothing(monkeypatch):
    # with CUDA present torch.autocast("cuda") stays on, but casts CUDA tensors only: PyTorch's
    # own availability test made to pass, so this CPU takes that path too
    monkeypatch.setattr(torch.cuda.amp.common, "amp_definitely_not_available", lambda: False)

    def cuda_autocast(model, optimizer, batches, k):
        for i, (x, y) in enumerate(batches):
            window = min(k, len(batches) - (i - i % k))
            with torch.autocast("cuda", dtype=torch.float16):
                assert torch.is_autocast_enabled("cuda")
                prediction = model(x)
            (F.mse_loss(prediction, y) / window).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                optimizer.step()
                optimizer.zero_grad()

    report = al.audit(cuda_autocast, **al.audit.audit_setup())
    assert report.codes == {"AUTOCAST_DISABLED"} and report.ok, str(report)
    note = report["AUTOCAST_DISABLED"]
    assert "PyTorch warned" not in note.evidence  # it did not: the audit saw the forwards
    assert "casts nothing" in note.message and "float64" in note.message
    # the advice names what the learner can do: the audit itself never runs on a GPU
    assert "cannot run a loop on a GPU" in note.message and "audit it again" not in note.message
    assert list(note.evidence.values()) == [20]  # every forward of both epochs
    # the right loop without autocast gets no note
    assert al.audit.catalogue_loop("correct_loop").audit().codes == set()


def test_the_audits_gradscaler_changes_its_scale_at_every_update():
    # unscale_ and update() after every backward: 4 updates before the first step's scale()s end
    report = al.audit.catalogue_loop("unscale_and_update_every_micro_batch").audit()
    assert report["SCALER_MISUSE"].evidence["scale"] == 2.0**10 * 2**4
    assert "growth_interval=1" in report["SCALER_MISUSE"].message
    # PyTorch's defaults, which the message quotes
    default = torch.amp.GradScaler("cpu")
    assert (default.get_scale(), default.get_growth_interval()) == (2.0**16, 2000)
    assert "growth_interval = 2000" in report["SCALER_MISUSE"].message


def test_in_place_changes_reach_the_data_set_only_through_views():
    x = torch.randn(16, 4)
    views = list(zip(x.split(4), torch.zeros(16, 1).split(4), strict=True))
    before = x.clone()
    for xb, _ in DataLoader(TensorDataset(x, torch.zeros(16, 1)), batch_size=4):
        xb.mul_(2)  # collated: a new tensor
    assert torch.equal(x, before)
    for xb, _ in DataLoader(views, batch_size=None):
        xb.mul_(2)  # a view of x
    assert not torch.equal(x, before)
    message = al.audit.catalogue_loop("normalises_in_place").audit()["BATCH_MODIFIED"].message
    assert "views" in message and "batch_size=None" in message and "collates" in message


def test_loop_d_is_one_and_a_half_times_its_mean_and_a_quarter_longer_than_the_reference():
    finding = al.audit.gallery_loop("D").audit()["LAST_WINDOW_CARRIED"]
    assert finding.evidence["‖seen‖ / ‖their mean‖"] == pytest.approx([1.5], rel=1e-9)
    assert finding.evidence["‖seen‖ / ‖reference‖"][0] == pytest.approx(1.25, abs=0.01)
    assert finding.evidence["cosine"][0] < 0.95
    assert "times the size it should have" not in finding.message


def test_the_timelines_lower_panel_draws_each_steps_measured_error():
    from accumlab.figures import named_artists

    report = al.audit.gallery_loop("A").audit()  # n times the mean: errors 3, 3, 1 per epoch
    points = named_artists(al.audit.plot_audit(report))["errors"].get_offsets()
    assert [round(float(y), 9) for _, y in points] == [3, 3, 1] * 2
    assert [int(x) for x, _ in points] == list(range(6))
