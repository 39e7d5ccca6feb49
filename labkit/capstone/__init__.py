"""The capstone (chapter 16): the pipeline tuned one measured change at a time, and the bake-off.

A chapter folder: it imports the spine and the other chapter folders, never the tools. The
public names are re-exported by ``labkit`` itself (``import labkit as lk``).
"""
