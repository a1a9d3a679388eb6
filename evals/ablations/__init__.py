"""Ablations: each part of an architecture on and off over the same questions; ``chart`` draws the rows."""
