"""The training loop: the engine that runs one step under hot switching, the trainer around it,
its events and reports, and the one-device reference every run is checked against."""
