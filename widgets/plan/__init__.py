"""Views of plans: predicted time and memory per strategy, dispatch bands, a step's device timeline,
and switch plans with their traffic."""
