"""Zenith's benchmark suite (`zenith bench`, `python -m zenith.bench`)."""
