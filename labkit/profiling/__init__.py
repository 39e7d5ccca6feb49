"""The per-batch timeline ``labkit diagnose`` draws (chapter 13b; chapter 13 types its own)."""
