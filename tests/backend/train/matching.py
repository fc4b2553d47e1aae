"""A distributed run against one device: every step's loss within 1e-5 and the final
parameters within 1e-4 (max-abs relative), fp32."""


def relative(a, b):
    return abs(a - b) / abs(b)


def assert_matches(losses, params, reference, first_step=0, what="the run"):
    ref_losses, ref_params = reference
    worst = max(relative(a, b) for a, b in zip(losses, ref_losses[first_step:], strict=True))
    assert worst <= 1e-5, f"{what}: a step's loss is off by {worst:.2e}"
    for name, ref in ref_params.items():
        error = ((params[name] - ref).abs().max() / ref.abs().max()).item()
        assert error <= 1e-4, f"{what}: {name} off by {error:.2e} after {len(ref_losses)} steps"


def worst_tensor(grads: dict, reference: dict) -> tuple[str, float]:
    """The tensor whose gradient is furthest from the reference's (relative norm), and how far."""
    errors = {n: ((grads[n] - ref).norm() / ref.norm()).item() for n, ref in reference.items()}
    name = max(errors, key=errors.get)
    return name, errors[name]
