"""Test support: databases per backend, in-process apps, real server processes."""
