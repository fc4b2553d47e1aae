"""Experiment tracking: a run's events written where the user's tools read them
(TensorBoard, MLflow, Weights & Biases), on rank 0, from the event schema alone."""
