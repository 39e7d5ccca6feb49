"""Tools around the chapters (chapter 00): ``labkit run``, reports, benchmarks, the CLI.

The top layer: tools may import the spine and the chapter folders, never the other way
round (tests/test_layout.py). The public names are re-exported by ``labkit`` itself.
"""
