"""optimizer.step() in place of scaler.step(optimizer): the update has the right size, so no
gradient check sees it, but GradScaler's inf/NaN check is gone. Shown here on a real overflow
(float16 autocast on the CPU), then flagged by the audit from the scaler's call log."""

import copy

import torch
import torch.nn.functional as F

import accumlab as al

K = 4


def _overflowing_run(step_with_scaler: bool):
    """One window of 4 micro-batches, float16 autocast forwards, a GradScaler at 2**10; the
    targets of one micro-batch are 1000 times too large, so its scaled gradient overflows float16
    in backward. The window's calls: scale(loss / k).backward() each, then unscale_, clip, step
    (scaler.step or optimizer.step), update. Returns (model before, model after, scaler)."""
    model = al.mlp(features=4, hidden=8, depth=1, seed=0, dtype=torch.float32)
    before = copy.deepcopy(model)
    data = al.regression_data(n=16, features=4, seed=0).to(torch.float32)
    batches = [(mb.x, mb.y) for mb in data.micro_batches(4)]
    x, y = batches[1]
    batches[1] = (x, y * 1000)  # one outlier micro-batch
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    for x, y in batches:
        with torch.autocast("cpu", dtype=torch.float16):
            prediction = model(x)
        scaler.scale(F.mse_loss(prediction.float(), y) / K).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    if step_with_scaler:
        scaler.step(optimizer)
    else:
        optimizer.step()
    scaler.update()
    return before, model, scaler


def _finite(model) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def test_optimizer_step_after_an_overflow_writes_nan_into_the_weights():
    before, after, scaler = _overflowing_run(step_with_scaler=False)
    assert _finite(before) and not _finite(after)
    assert any(bool(torch.isnan(p).any()) for p in after.parameters())
    assert scaler.get_scale() == 2.0**9  # update() still saw the inf and lowered the scale


def test_scaler_step_skips_the_update_after_an_overflow():
    before, after, scaler = _overflowing_run(step_with_scaler=True)
    assert _finite(after)
    for p, q in zip(before.parameters(), after.parameters(), strict=True):
        assert torch.equal(p, q)  # the step was skipped
    assert scaler.get_scale() == 2.0**9


def test_the_audit_flags_optimizer_step_from_the_scaler_log():
    loop = al.audit.catalogue_loop("scaler_step_skipped")
    report = loop.audit()
    assert report.codes == {"SCALER_STEP_SKIPPED"} and not report.ok, str(report)
    finding = report["SCALER_STEP_SKIPPED"]
    assert finding.steps == tuple(range(len(report.seen_steps)))  # every optimizer step
    assert "scale" in finding.evidence["GradScaler calls"]
    assert "step" not in finding.evidence["GradScaler calls"]
    assert "unscale_ ran first" in finding.message
    # the update had the right size: every step's gradient matched the reference
    assert all(c.rel_error is not None and c.rel_error < 1e-12 for c in report.checks)


def test_a_scaler_handed_over_and_never_used_is_flagged_too():
    def ignores_the_scaler(model, optimizer, batches, k, *, scaler, max_norm):
        loop = al.audit.catalogue_loop("correct_loop").fn
        loop(model, optimizer, batches, k)

    setup = al.audit.audit_setup(scaler=True, max_norm=1e6)
    report = al.audit(ignores_the_scaler, **setup)
    assert report.codes == {"SCALER_STEP_SKIPPED"}, str(report)
    assert "never called" in report["SCALER_STEP_SKIPPED"].message


def test_the_documented_order_is_not_flagged():
    report = al.audit.catalogue_loop("clip_before_unscale").audit()
    assert "SCALER_STEP_SKIPPED" not in report.codes  # it calls scaler.step: another bug
    full = al.audit.audit_setup(scaler=True, max_norm=0.5, scheduler=True)

    def documented(model, optimizer, batches, k, *, scaler, scheduler, max_norm):
        for i, (x, y) in enumerate(batches):
            window = min(k, len(batches) - (i - i % k))
            scaler.scale(F.mse_loss(model(x), y) / window).backward()
            if (i + 1) % k == 0 or i + 1 == len(batches):
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad()

    assert al.audit(documented, **full).findings == []
