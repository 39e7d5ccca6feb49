"""The named benchmarks, one module each (chapters 01-02, 06, 09-14); see ``bench``."""
