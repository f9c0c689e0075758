"""Arithmetic on a model's config: what each cache holds, the bytes a step reads (the memory wall), a run's
time estimate and the `kvviz memory` table. No torch, no Qt.
"""
