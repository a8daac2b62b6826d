"""Solutions to lesson 01's exercises (kept apart from the lesson)."""


def two_losses(w, x):
    h = (w * x).exp()  # the trunk, built once: both losses' backward passes walk it
    first, second = h.sum(), (h**2).sum()
    first.backward(retain_graph=True)  # keep what the trunk saved: the second pass needs it
    second.backward()
    return w.grad


def one_backward_of_the_sum(w, x):
    h = (w * x).exp()
    (h.sum() + (h**2).sum()).backward()  # the same gradient, but one pass, no retain_graph
    return w.grad


SOLUTIONS = {"01.1": 2, "01.2": two_losses, "01.3": {"a", "b", "d"}}
WRONG = {"01.1": 4, "01.2": one_backward_of_the_sum, "01.3": {"a"}}
