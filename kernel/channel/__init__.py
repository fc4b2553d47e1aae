"""The signed ZMQ channel between a job's ranks and its kernel: message signing, the kernel's
end (``kernel_end``) and a rank's end (``worker_end``).

Shared by both processes, so it imports only zmq and the standard library.
"""
