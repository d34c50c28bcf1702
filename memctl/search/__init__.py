"""Retrieval: relevance (the calibrated score), ranking (optional importance/recency order), stored importance."""
