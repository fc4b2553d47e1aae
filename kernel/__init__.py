"""The notebook side: kernel, magics, jobs, launchers, channel and the command line."""
