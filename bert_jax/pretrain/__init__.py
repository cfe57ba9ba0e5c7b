"""Pretraining: example builders, masking selectors, the resumable stream, the objectives,
inspect, attention guidance and the pretraining task."""
