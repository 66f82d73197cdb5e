"""Tests of the health area."""
