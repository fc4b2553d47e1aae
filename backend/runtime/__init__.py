"""Communication between ranks: collectives (each with its backward), point-to-point exchanges,
process groups, flat buffers, gradient accumulation, devices and the ranks tests and benchmarks
spawn. The parallel layers built on it are ``backend.parallel``."""
