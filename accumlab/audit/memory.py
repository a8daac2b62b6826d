"""Detectors: graphs a loop keeps alive across windows, and forwards whose graph backward never
used (lesson 08).

Both are measured with the tag the instruments hang on every forward's output node: it lives
exactly as long as that graph and is called when backward reaches it.
"""

from __future__ import annotations

from .findings import Finding
from .messages import message
from .recording import Recording


def memory_findings(rec: Recording) -> list[Finding]:
    out = []
    alive = [s.old_graphs for s in rec.steps]
    # a graph of the previous window's last forward may linger in a loop variable: that is one;
    # more than one, and more at the last step than at the first, is growth
    if len(alive) >= 2 and alive[-1] > max(1, alive[0]):
        held_bytes = max(s.saved_bytes for s in rec.steps)
        held = (
            f"They still hold {held_bytes} bytes of saved activations."
            if held_bytes
            else "Backward already freed their saved activations; their nodes stay."
        )
        text = message("GRAPHS_KEPT_ALIVE", alive=alive, steps=list(range(len(alive))), held=held)
        evidence = {
            "graphs of earlier windows alive at each step": alive,
            "saved bytes alive at each step": [s.saved_bytes for s in rec.steps],
        }
        out.append(Finding("GRAPHS_KEPT_ALIVE", text, evidence))
    unused = sorted(f for f in rec.tagged if f not in rec.backpropagated)
    if unused:
        batches = [rec.forwards[f] for f in unused]
        text = message("FORWARD_WITHOUT_BACKWARD", count=len(unused), batches=batches)
        evidence = {"forward passes (0-based)": unused, "their micro-batches": batches}
        out.append(Finding("FORWARD_WITHOUT_BACKWARD", text, evidence))
    return out
