"""The soak run: bounded, loopback-only mixed traffic with faults; see ``run.py``."""
