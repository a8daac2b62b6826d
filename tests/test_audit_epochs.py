"""al.audit over two epochs: what a loop does with an epoch's short last window is measured at the
next epoch's first step (carried, dropped, or windows that run across epochs), and a loop that
keeps state across epochs is a class the audit instantiates once per run."""

import pytest
import torch
import torch.nn.functional as F

import accumlab as al


def _loop(name):
    return al.audit.catalogue_loop(name).fn


def _tail(setup):
    """(micro-batches per epoch, micro-batches in an epoch's short last window)."""
    n = len(setup["data"].micro_batches(setup["micro_batch_size"]))
    return n, n % setup["accumulation_steps"]


def test_a_tail_nothing_zeroes_joins_the_next_epochs_first_step():
    setup = al.audit.audit_setup()
    n, tail = _tail(setup)
    k = setup["accumulation_steps"]
    report = al.audit(_loop("last_window_carried"), **setup)
    assert report.codes == {"LAST_WINDOW_CARRIED"} and not report.ok, str(report)
    # each epoch steps on its full windows only; the second epoch's first step comes after its
    # own first k micro-batches, with the first epoch's tail still in .grad
    assert report.seen_steps == (k, 2 * k, n + k, n + 2 * k)
    finding = report["LAST_WINDOW_CARRIED"]
    assert finding.evidence["micro-batches in the step's window"] == [tail + k]
    assert finding.evidence["of them from the previous epoch"] == [tail]
    # every loss divided by k: tail + k micro-batches at 1/k each, (tail + k) / k times their mean
    assert finding.evidence["‖seen‖ / ‖their mean‖"] == pytest.approx([(tail + k) / k], rel=1e-9)
    assert f"{(tail + k) / k:.3g} times the mean of what it holds" in finding.message


def test_a_tail_zeroed_when_the_next_epoch_starts_is_dropped_every_epoch():
    setup = al.audit.audit_setup()
    report = al.audit(_loop("last_window_dropped"), **setup)
    assert report.codes == {"LAST_WINDOW_DROPPED"} and report.ok, str(report)
    finding = report["LAST_WINDOW_DROPPED"]
    # the samples of each epoch's last 10 % 4 = 2 micro-batches of 4: counted from the data
    batches = setup["data"].micro_batches(setup["micro_batch_size"])
    left_out = sum(len(b) for b in batches[len(batches) - len(batches) % 4 :])
    total = len(setup["data"])
    assert finding.evidence["samples left out per epoch"] == left_out == 8
    assert f"trains on {total - left_out} of its {total} samples" in finding.message
    assert "measured at step(s) [2]" in finding.message  # the second epoch's first step
    stated = al.audit(_loop("last_window_dropped"), **al.audit.audit_setup(last_window="drop"))
    assert stated.findings == [], str(stated)
    # stating "drop" does not excuse a tail that is carried instead of dropped
    carried = al.audit(_loop("last_window_carried"), **al.audit.audit_setup(last_window="drop"))
    assert carried.codes == {"LAST_WINDOW_CARRIED"}, str(carried)


def test_one_epoch_cannot_tell_a_carried_tail_from_a_dropped_one():
    one = al.audit.audit_setup(epochs=1)
    for name in ("last_window_carried", "last_window_dropped"):
        report = al.audit(_loop(name), **one)
        assert report.codes == {"LAST_WINDOW_DROPPED"}, str(report)
        text = report["LAST_WINDOW_DROPPED"].message
        assert "cannot tell" in text and "epochs=2" in text
        assert "Each epoch trains on" not in text  # not claimed: it was not measured


def test_windows_across_epochs_are_a_policy_checked_window_by_window():
    setup = al.audit.audit_setup()
    n, _ = _tail(setup)
    k = setup["accumulation_steps"]
    report = al.audit(_loop("windows_across_epochs"), **setup)
    assert report.codes == {"WINDOWS_CROSS_EPOCHS"} and report.ok, str(report)
    assert report.seen_steps == tuple(range(k, 2 * n + 1, k))  # every k, counted over the run
    # every window, the one across the epoch boundary included, was compared and matched
    assert len(report.checks) == 2 * n // k
    assert all(c.rel_error is not None and c.rel_error < 1e-12 for c in report.checks)
    assert 'last_window="carry"' in report["WINDOWS_CROSS_EPOCHS"].message
    stated = al.audit(_loop("windows_across_epochs"), **al.audit.audit_setup(last_window="carry"))
    assert stated.findings == [], str(stated)
    # the correct per-epoch loop is not what "carry" states
    assert al.audit(_loop("correct_loop"), **al.audit.audit_setup(last_window="carry")).findings


def test_a_counter_across_epochs_with_zero_grad_at_each_epoch_start():
    report = al.audit.catalogue_loop("count_across_epochs").audit()
    assert report.codes == {"CARRIED_WINDOW_ZEROED"}, str(report)
    text = report["CARRIED_WINDOW_ZEROED"].message
    assert "step condition is not the bug" in text
    assert "the first 2 of the window's 4 micro-batches" in text
    assert "OFF_BY_ONE_SCHEDULE" not in report.codes  # the steps are where the counter says


def test_a_class_is_instantiated_once_per_run_and_its_state_never_leaks():
    first = al.audit.catalogue_loop("windows_across_epochs").audit()
    second = al.audit.catalogue_loop("windows_across_epochs").audit()
    assert first.seen_steps == second.seen_steps
    assert first.name == "WindowsAcrossEpochs"

    class NeedsAnArgument:
        def __init__(self, k):
            self.k = k

        def __call__(self, model, optimizer, batches, k):
            pass

    report = al.audit(NeedsAnArgument, **al.audit.audit_setup())
    assert report.codes == {"STEP_RAISED"} and "TypeError" in report.findings[0].message


def test_an_error_in_the_second_epoch_says_which_epoch():
    class FailsLater:
        def __init__(self):
            self.calls = 0

        def __call__(self, model, optimizer, batches, k):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("out of data")
            al.audit.catalogue_loop("correct_loop").fn(model, optimizer, batches, k)

    report = al.audit(FailsLater, **al.audit.audit_setup())
    assert report.codes == {"STEP_RAISED"}
    assert "in epoch 2 of 2" in report.findings[0].message


def test_a_token_run_that_ends_inside_a_window():
    # 7 micro-batches, k = 3, two epochs: 14 = 4 windows of 3 and a last one of 2
    def counts_across(model, optimizer, batches, k, state={}):  # noqa: B006 - a run's counter
        for x, y in batches:
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
            (loss / k).backward()
            state["count"] = state.get("count", 0) + 1
            if state["count"] % k == 0:
                optimizer.step()
                optimizer.zero_grad()

    report = al.audit(counts_across, **al.audit.audit_setup("tokens"))
    # windows across epochs, each a mean of micro-batch means: the last 2 never step
    assert {"WINDOWS_CROSS_EPOCHS", "MEAN_OF_MEANS"} <= report.codes, str(report)
    assert "never used by one" in report["WINDOWS_CROSS_EPOCHS"].message


def _lightning_manual_first_step_grads(fits: int) -> list:
    """Lightning's documented manual accumulation (a step every 4 batches, 10 batches an epoch)
    for two epochs: in one Trainer.fit, or one fit per epoch. The norm of .grad at each epoch's
    first training_step (None: no gradient)."""
    import lightning as L
    from torch.utils.data import DataLoader

    setup = al.audit.audit_setup()
    batches = [(mb.x, mb.y) for mb in setup["data"].micro_batches(4)]
    model = setup["model"]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    norms = []

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False
            self.model = model

        def training_step(self, batch, batch_idx):
            if batch_idx == 0:
                grads = [p.grad for p in model.parameters() if p.grad is not None]
                norms.append(
                    float(torch.cat([g.reshape(-1) for g in grads]).norm()) if grads else None
                )
            opt = self.optimizers()
            self.manual_backward(F.mse_loss(self.model(batch[0]), batch[1]) / 4)
            if (batch_idx + 1) % 4 == 0:
                opt.step()
                opt.zero_grad()

        def configure_optimizers(self):
            return optimizer

    module = Module()
    trainer = L.Trainer(
        max_epochs=2 // fits, accelerator="cpu", devices=1, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0,
    )  # fmt: skip
    for fit in range(fits):
        trainer.fit_loop.max_epochs = (fit + 1) * (2 // fits)
        trainer.fit(module, train_dataloaders=DataLoader(batches, batch_size=None))
    return norms


@pytest.mark.slow
def test_lightning_manual_loop_carries_the_tail_within_one_fit_not_across_fits():
    # the corpus audits tests/audit_corpus/frameworks.py's lightning_manual over one epoch: why
    one_fit = _lightning_manual_first_step_grads(fits=1)
    two_fits = _lightning_manual_first_step_grads(fits=2)
    assert one_fit[0] is None and one_fit[1] > 0  # epoch 2 began with the tail in .grad
    assert two_fits == [None, None]  # a new fit began with no gradient at all
