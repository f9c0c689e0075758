"""What crosses threads, processes and files: the step record (StepTrace, RunSummary) and a run's saved file.

Stdlib and numpy only: no torch, no Qt.
"""
