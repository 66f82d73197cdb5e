"""Storage: schema, engines, the single writer, projections, queries, the hash chain.

This package is the only place that speaks SQL.
"""
