"""The lesson presenter (full screen, the caption over the scene's panels) and its offscreen exports (PNGs, a PDF);
the lessons themselves are kvviz.lessons (no Qt)."""
