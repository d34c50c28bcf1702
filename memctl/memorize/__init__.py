"""Memorize: transcript -> extraction (pipeline) -> gate (quality, gate_model, grounding) -> consolidation."""
