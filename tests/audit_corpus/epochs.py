"""Corpus loops whose step counter restarts with every epoch or runs across epochs (see
__init__.py for the adaptation). A counter that runs across epochs lives on an object in the
original, so here it is a class: the audit makes one instance per run and calls it once per epoch.
Each source below was read in the stored copy named beside it."""

import torch
import torch.nn.functional as F

loss_function = F.mse_loss


# fastai/fastai fastai/callback/training.py (GradientAccumulation, stored copy at commit 63cbbda):
# `count` is reset in before_fit only; after_loss divides loss_grad by n_acc / bs; before_step adds
# bs to count and, while count < n_acc, raises CancelBatchException, which skips the step and the
# zero_grad of fastai/learner.py's _do_grad_opt (backward, step, then opt.zero_grad()). Nothing
# zeroes the gradients when an epoch begins.
class FastaiGradientAccumulation:
    def __init__(self):
        self.count = 0  # before_fit

    def __call__(self, model, optimizer, batches, k):
        n_acc = k * len(batches[0][0])  # a window of k micro-batches, counted in samples
        for xb, yb in batches:
            loss_grad = loss_function(model(xb), yb)
            loss_grad = loss_grad / (n_acc / len(yb))  # after_loss
            loss_grad.backward()  # _backward
            self.count += len(yb)  # before_step
            if self.count < n_acc:
                continue  # CancelBatchException: no step, no zero_grad
            self.count = 0
            optimizer.step()  # _step
            optimizer.zero_grad()  # _do_grad_opt


# open-mmlab/mmengine mmengine/optim/optimizer/optimizer_wrapper.py (OptimWrapper, stored copy at
# commit ab9d516): update_params divides the loss by scale_loss's loss_factor, backward() adds 1
# to _inner_count, and when should_update() (_inner_count % _accumulative_counts == 0 or
# _inner_count == _max_counts) it calls step() and zero_grad(). mmengine/runner/runner.py
# (Runner.train, stored copy at commit 0050ff7) calls optim_wrapper.initialize_count_status(model,
# train_loop.iter, train_loop.max_iters) before the loop runs, so _max_counts is the run's
# iterations: loss_factor is _accumulative_counts until the last max_iters % k iterations, which
# are divided by their own count (_remainder_counts) and stepped at the run's end.
# mmengine/runner/loops.py (EpochBasedTrainLoop.run_epoch, stored copy at commit 001950a): every
# batch goes to train_step; nothing resets the count or zeroes the gradients when an epoch begins.
class MMEngineOptimWrapper:
    EPOCHS = 2  # the audit's epochs: max_iters of the run

    def __init__(self):
        self._inner_count = 0
        self._max_counts = None  # set from the first epoch's length, as Runner.train does

    def __call__(self, model, optimizer, batches, k):
        _accumulative_counts = k
        if self._max_counts is None:  # initialize_count_status(model, 0, max_iters)
            self._max_counts = len(batches) * self.EPOCHS
            self._divisible_counts = self._max_counts // k * k
            self._remainder_counts = self._max_counts - self._divisible_counts
        for data_batch in batches:
            loss = loss_function(model(data_batch[0]), data_batch[1])
            if self._inner_count < self._divisible_counts:  # scale_loss
                loss_factor = _accumulative_counts
            else:
                loss_factor = self._remainder_counts
            loss = loss / loss_factor
            loss.backward()  # backward
            self._inner_count += 1
            if (
                self._inner_count % _accumulative_counts == 0
                or self._inner_count == self._max_counts
            ):  # should_update
                optimizer.step()
                optimizer.zero_grad()


class MMEngineRunEndsInsideAWindow(MMEngineOptimWrapper):
    """The same wrapper on a run whose micro-batches are not a multiple of k."""


# espnet/espnet espnet2/train/trainer.py (Trainer.train_one_epoch, stored copy at commit 004a54c):
# iiter counts from 1 in every epoch; loss /= accum_grad; backward; when iiter % accum_grad == 0,
# clip_grad_norm_, optimizer.step() if the norm is finite, then optimizer.zero_grad(). Nothing
# zeroes before an epoch's first backward (Trainer.run calls train_one_epoch once per epoch).
def espnet2_train_one_epoch(model, optimizer, batches, k, *, max_norm):
    accum_grad, grad_clip = k, max_norm
    model.train()
    for iiter, batch in enumerate(batches, 1):
        loss = loss_function(model(batch[0]), batch[1])
        loss /= accum_grad
        loss.backward()
        if iiter % accum_grad == 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
            if torch.isfinite(grad_norm):
                optimizer.step()
            optimizer.zero_grad()


# ultralytics/yolov5 train.py (stored copy at commit 0015b188): last_opt_step = -1 before the
# epochs; every epoch calls optimizer.zero_grad() before its batches; ni = i + nb * epoch counts
# batches since training began; the loss is "scaled by batch_size" and never divided by
# accumulate; a step when ni - last_opt_step >= accumulate (scaler.step, scaler.update,
# optimizer.zero_grad, last_opt_step = ni). Warmup, EMA and autocast left out; accumulate = k.
class YOLOv5Train:
    def __init__(self):
        self.epoch, self.last_opt_step = 0, -1

    def __call__(self, model, optimizer, batches, k, *, scaler):
        nb, accumulate = len(batches), k
        optimizer.zero_grad()
        for i, (imgs, targets) in enumerate(batches):
            ni = i + nb * self.epoch  # number integrated batches (since train start)
            pred = model(imgs)
            loss = loss_function(pred, targets) * len(imgs)  # loss scaled by batch_size
            scaler.scale(loss).backward()
            if ni - self.last_opt_step >= accumulate:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
                self.last_opt_step = ni
        self.epoch += 1
