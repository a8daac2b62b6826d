"""The one rounding a float32 main gradient keeps, and the kernel that removes it (lesson 12).

A hook-fed main gradient receives each micro-batch's weight gradient already rounded to the
parameter's dtype: the weight-gradient matrix multiply wrote a bfloat16 `.grad`, and only then is
it added into float32. Megatron-LM's `gradient_accumulation_fusion` (a CUDA kernel,
`fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32`) instead writes the multiply's float32
result straight into `main_grad`, so the weight gradient is never rounded to bfloat16. That kernel
is not run here; this module emulates both routes on the CPU for one bfloat16 linear layer, from
the same bfloat16 inputs and output gradients, against a float64 sum of the same products, and
against the float64 gradient of the loss, where the bfloat16 rounding of the activations and output
gradients, which no weight-gradient kernel removes, counts too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._threads import one_thread
from .._validate import positive_int


@one_thread()
def fused_wgrad_errors(
    *, k: int = 256, micro_batch_size: int = 4, features: int = 32, seed: int = 0
) -> dict:
    """Relative L2 error of one bfloat16 linear layer's accumulated weight gradient, two ways.

    "bfloat16 wgrad, then float32 add": autograd's weight gradient (a bfloat16 `.grad`) added into
    a float32 buffer, as `MainGrad` does. "float32-output wgrad into float32": the same bfloat16
    input and output gradient multiplied in float32 and added into the float32 buffer, as a fused
    float32-output weight-gradient kernel does. "errors": both against the float64 sum of the same
    k products, so the error is the weight gradient's rounding and the float32 adds, nothing else.
    "errors_vs_loss": both against the float64 gradient of the loss (float64 data, the same
    weights), where the bfloat16 inputs and output gradients' own rounding remains.
    """
    from ..data import regression_data

    k = positive_int("k", k, maximum=4096)
    size = positive_int("micro_batch_size", micro_batch_size, maximum=4096)
    features = positive_int("features", features, maximum=1024)
    seed = positive_int("seed", seed, minimum=0)
    from ..models import seeded

    with seeded(seed):  # the learner's own generator state is left as it was
        layer = torch.nn.Linear(features, 1, bias=False).to(torch.bfloat16)
    data = regression_data(n=k * size, features=features, seed=seed)
    shape = layer.weight.shape
    unfused = torch.zeros(shape, dtype=torch.float32)
    fused = torch.zeros(shape, dtype=torch.float32)
    exact = torch.zeros(shape, dtype=torch.float64)
    for mb in data.micro_batches(size):
        x = mb.x.to(torch.bfloat16)
        out = layer(x)
        seen = []
        out.register_hook(seen.append)  # the bfloat16 output gradient the weight gradient reads
        (F.mse_loss(out.float(), mb.y.float()) / k).backward()
        g = seen[0]
        unfused.add_(layer.weight.grad)  # the bfloat16 GEMM's rounded result, then a float32 add
        layer.weight.grad = None
        # bfloat16 × bfloat16 products are exact in float32: only the float32 sums round here
        fused.add_(g.float().t() @ x.float())
        exact.add_(g.double().t() @ x.double())

    # the whole batch's mean loss in float64 is the sum of the k micro-batch losses above
    weight = layer.weight.detach().double().requires_grad_(True)
    F.mse_loss(data.x.double() @ weight.t(), data.y.double()).backward()

    def error(got: torch.Tensor, reference: torch.Tensor) -> float:
        return float((got.double() - reference).norm() / reference.norm())

    routes = {
        "bfloat16 wgrad, then float32 add": unfused,
        "float32-output wgrad into float32": fused,
    }
    return {
        "k": k,
        "errors": {route: error(g, exact) for route, g in routes.items()},
        "errors_vs_loss": {route: error(g, weight.grad) for route, g in routes.items()},
    }
