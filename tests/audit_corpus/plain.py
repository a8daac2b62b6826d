"""Corpus loops written in plain PyTorch (see __init__.py for how each was adapted)."""

import torch
import torch.nn.functional as F

loss_function = F.mse_loss


# https://docs.pytorch.org/docs/stable/notes/amp_examples.html ("Gradient accumulation"):
# steps only when (i + 1) % iters_to_accumulate == 0; autocast dropped.
def pytorch_amp_docs(model, optimizer, batches, k, *, scaler):
    iters_to_accumulate = k
    for i, (input, target) in enumerate(batches):
        output = model(input)
        loss = loss_function(output, target)
        loss = loss / iters_to_accumulate
        scaler.scale(loss).backward()
        if (i + 1) % iters_to_accumulate == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


# https://discuss.pytorch.org/t/pytorch-gradient-accumulation/55955 (the loop it quotes from
# T. Wolf, "Training Larger Batches", https://medium.com/huggingface/training-larger-batches-
# practical-tips-on-1-gpu-multi-gpu-distributed-setups-ec88c3e51255)
def forum_accumulation(model, optimizer, batches, k):
    accumulation_steps = k
    model.zero_grad()  # Reset gradients tensors
    for i, (inputs, labels) in enumerate(batches):
        predictions = model(inputs)  # Forward pass
        loss = loss_function(predictions, labels)  # Compute loss function
        loss = loss / accumulation_steps  # Normalize our loss (if averaged)
        loss.backward()  # Backward pass
        if (i + 1) % accumulation_steps == 0:  # Wait for several backward steps
            optimizer.step()  # Now we can do an optimizer step
            model.zero_grad()  # Reset gradients tensors


# https://leyaa.ai/codefly/learn/pytorch/part-1/pytorch-gradient-accumulation-and-zeroing
# (a tutorial: the loss is never divided)
def tutorial_undivided(model, optimizer, batches, k):
    accumulation_steps = k
    optimizer.zero_grad()
    for i, (data, labels) in enumerate(batches):
        outputs = model(data)
        loss = loss_function(outputs, labels)
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()


# https://github.com/karpathy/nanoGPT/blob/master/train.py (the micro-step loop; get_batch's
# prefetch becomes the next micro-batch of the list, one `iter` per window)
def nanogpt(model, optimizer, batches, k, *, scaler, max_norm):
    gradient_accumulation_steps, grad_clip = k, max_norm
    data = iter(batches)
    X, Y = next(data)
    for _ in range(len(batches) // gradient_accumulation_steps):
        for _micro_step in range(gradient_accumulation_steps):
            logits = model(X)
            loss = F.mse_loss(logits, Y)
            loss = loss / gradient_accumulation_steps  # scale the loss to account for accumulation
            X, Y = next(data, (None, None))  # prefetch the next batch
            scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)


# https://github.com/karpathy/llm.c/blob/master/train_gpt2.py (the training step; the learning
# rate schedule is the audit's own)
def llm_c(model, optimizer, batches, k, *, max_norm):
    grad_accum_steps = k
    train_loader = iter(batches)
    for _step in range(len(batches) // grad_accum_steps):
        optimizer.zero_grad(set_to_none=True)
        lossf = 0.0
        for _micro_step in range(grad_accum_steps):
            x, y = next(train_loader)
            loss = F.mse_loss(model(x), y)
            # addition of gradients corresponds to a SUM in the objective, but
            # instead of a SUM we want MEAN, so we scale the loss here
            loss = loss / grad_accum_steps
            lossf += loss.detach()  # keep track of the mean loss
            loss.backward()
        lossf = lossf.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()


# https://github.com/huggingface/pytorch-image-models/blob/main/train.py (train_one_epoch:
# the last, short window is divided by its own size; lr_scheduler.step_update becomes the
# audit's scheduler.step(), once per update)
def timm(model, optimizer, batches, k, *, scheduler, max_norm):
    accum_steps = k
    last_accum_steps = len(batches) % accum_steps
    last_batch_idx = len(batches) - 1
    last_batch_idx_to_accum = len(batches) - last_accum_steps
    optimizer.zero_grad()
    for batch_idx, (input, target) in enumerate(batches):
        last_batch = batch_idx == last_batch_idx
        need_update = last_batch or (batch_idx + 1) % accum_steps == 0
        if batch_idx >= last_batch_idx_to_accum:
            accum_steps = last_accum_steps

        def _forward(input=input, target=target, accum_steps=accum_steps):
            output = model(input)
            loss = loss_function(output, target)
            if accum_steps > 1:
                loss /= accum_steps
            return loss

        def _backward(_loss, need_update=need_update):
            _loss.backward()
            if need_update:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()

        loss = _forward()
        _backward(loss)
        if not need_update:
            continue
        optimizer.zero_grad()
        scheduler.step()


# Hugging Face Transformers Trainer.train, v3.0.x
# (https://github.com/huggingface/transformers/blob/v3.0.2/src/transformers/trainer.py): a step
# when (step + 1) % gradient_accumulation_steps == 0, or at the end of an epoch shorter than k
def transformers_trainer_v3(model, optimizer, batches, k, *, scheduler, max_norm):
    epoch_iterator = batches
    for step, inputs in enumerate(epoch_iterator):
        loss = loss_function(model(inputs[0]), inputs[1])
        if k > 1:
            loss = loss / k
        loss.backward()
        if (step + 1) % k == 0 or (
            # last step in epoch but step is always smaller than gradient_accumulation_steps
            len(epoch_iterator) <= k and (step + 1) == len(epoch_iterator)
        ):
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            scheduler.step()
            model.zero_grad()


# https://github.com/huggingface/transformers/issues/986 (examples/run_squad.py of
# pytorch-transformers 1.0 clipped after every backward; fixed in #1580)
def run_squad_clip_every_backward(model, optimizer, batches, k, *, scheduler, max_norm):
    for step, batch in enumerate(batches):
        loss = loss_function(model(batch[0]), batch[1])
        if k > 1:
            loss = loss / k
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if (step + 1) % k == 0:
            optimizer.step()
            scheduler.step()  # Update learning rate schedule
            model.zero_grad()


# https://github.com/h2oai/h2o-llmstudio/blob/a9d72fffef370c7fd0dd9f29ece06ab45b6c5815/train.py
# (run_train; reported in https://github.com/h2oai/h2o-llmstudio/issues/663)
def h2o_llmstudio(model, optimizer, batches, k, *, scheduler, max_norm):
    grad_accumulation = k
    for itr, data in enumerate(batches):
        loss = loss_function(model(data[0]), data[1])
        if grad_accumulation != 1:
            loss = loss / grad_accumulation
        loss.backward()
        if itr % grad_accumulation == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if scheduler is not None:
            scheduler.step()


# https://github.com/microsoft/Swin-Transformer/issues/311 (main_simmim_pt.py with
# ACCUMULATION_STEPS > 1 and CLIP_GRAD: unscale_ after every backward)
def swin_simmim(model, optimizer, batches, k, *, scaler, max_norm):
    for idx, (samples, targets) in enumerate(batches):
        loss = loss_function(model(samples), targets)
        loss = loss / k
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if (idx + 1) % k == 0:
            scaler.step(optimizer)
            optimizer.zero_grad()
            scaler.update()


# https://docs.pytorch.org/docs/stable/notes/faq.html ("Don't accumulate history across your
# training loop"), audited with k = 1 as written
def pytorch_faq_total_loss(model, optimizer, batches, k):
    total_loss = 0
    for input, target in batches:
        optimizer.zero_grad()
        output = model(input)
        loss = loss_function(output, target)
        loss.backward()
        optimizer.step()
        total_loss += loss
    return total_loss


# https://huggingface.co/blog/gradient_accumulation: each micro-batch's loss is the mean over its
# own tokens, divided by gradient_accumulation_steps (the Trainer before the fix)
def hf_mean_over_tokens(model, optimizer, batches, k):
    for i, (x, y) in enumerate(batches):
        logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100)
        (loss / k).backward()
        if (i + 1) % k == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


# https://huggingface.co/blog/gradient_accumulation (the fix): a summed loss divided by the
# window's number of real tokens, num_items_in_batch
def hf_num_items_in_batch(model, optimizer, batches, k):
    for start in range(0, len(batches), k):
        window = batches[start : start + k]
        num_items_in_batch = sum(int((y != -100).sum()) for _, y in window)
        for x, y in window:
            logits = model(x)
            loss = F.cross_entropy(
                logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum"
            )
            (loss / num_items_in_batch).backward()
        optimizer.step()
        optimizer.zero_grad()
