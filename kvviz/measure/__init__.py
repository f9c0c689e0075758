"""Probes that run torch on this machine: the read ceiling, the bare reference loop, an approximate cache's
quality against the exact one, and the step clocks.
"""
